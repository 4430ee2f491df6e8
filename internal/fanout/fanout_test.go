package fanout

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

func pol(sources []snapv1.Source, repos ...string) *snapv1.SnapshotPolicy {
	p := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: snapv1.SnapshotPolicySpec{Sources: sources}}
	if len(repos) == 1 {
		p.Spec.Repository = &snapv1.RepositoryRef{Name: repos[0]}
	}
	if len(repos) > 1 {
		for _, r := range repos {
			p.Spec.Repositories = append(p.Spec.Repositories, snapv1.RepositoryRef{Name: r})
		}
	}
	return p
}

var pvcSrc = snapv1.Source{PVC: &snapv1.LocalObjectRef{Name: "data"}}
var selSrc = snapv1.Source{PVCSelector: &snapv1.PVCSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}}

func TestChildren(t *testing.T) {
	base := Base("p-manual", time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC))
	if base != "p-manual-20261202030405" {
		t.Fatalf("base %q", base)
	}
	cases := []struct {
		name     string
		p        *snapv1.SnapshotPolicy
		selected map[int][]string
		want     int
		check    func(t *testing.T, cs []Child)
	}{
		{"one pvc one repo: the base name, no pins", pol([]snapv1.Source{pvcSrc}, "r"), nil, 1, func(t *testing.T, cs []Child) {
			if cs[0].Name != base || cs[0].Source != nil || cs[0].Repository != nil {
				t.Errorf("%+v", cs[0])
			}
		}},
		{"selector: one child per PVC, pinned", pol([]snapv1.Source{selSrc}, "r"), map[int][]string{0: {"b", "a", "c"}}, 3, func(t *testing.T, cs []Child) {
			if cs[0].Source.Target.PVC.Name != "a" || !strings.HasPrefix(cs[0].Name, base+"-pvc-a-") {
				t.Errorf("%+v", cs[0])
			}
		}},
		{"two repos: one child per repo, pinned", pol([]snapv1.Source{pvcSrc}, "r1", "r2"), nil, 2, func(t *testing.T, cs []Child) {
			if cs[1].Repository.Name != "r2" || cs[1].Repository.Kind != snapv1.KindRepository || !strings.Contains(cs[1].Name, "-repo-r2-") || cs[1].Source != nil {
				t.Errorf("%+v", cs[1])
			}
		}},
		{"selector times repos", pol([]snapv1.Source{selSrc}, "r1", "r2"), map[int][]string{0: {"a", "b"}}, 4, nil},
		{"selector matching nothing", pol([]snapv1.Source{selSrc}, "r"), nil, 0, nil},
		{"selector: its PVCs share one group (the default groupBy)", pol([]snapv1.Source{selSrc}, "r"), map[int][]string{0: {"a", "b"}}, 2, func(t *testing.T, cs []Child) {
			g0, g1 := cs[0].Source.Group, cs[1].Source.Group
			if g0 == nil || g1 == nil || *g0 != *g1 || g0.Namespace != "ns" || g0.VolumeGroupSnapshotName == "" {
				t.Errorf("groups %+v %+v", g0, g1)
			}
		}},
		{"selector times repos: one group per repository", pol([]snapv1.Source{selSrc}, "r1", "r2"), map[int][]string{0: {"a", "b"}}, 4, func(t *testing.T, cs []Child) {
			groups := map[string]string{}
			for _, c := range cs {
				groups[c.Repository.Name+"/"+c.Source.Target.PVC.Name] = c.Source.Group.VolumeGroupSnapshotName
			}
			if groups["r1/a"] != groups["r1/b"] || groups["r2/a"] != groups["r2/b"] || groups["r1/a"] == groups["r2/a"] {
				t.Errorf("groups %v", groups)
			}
		}},
		{"a selector matching one PVC needs no group", pol([]snapv1.Source{selSrc}, "r"), map[int][]string{0: {"a"}}, 1, func(t *testing.T, cs []Child) {
			if cs[0].Source.Group != nil {
				t.Errorf("%+v", cs[0].Source.Group)
			}
		}},
		{"groupBy None: independent snapshots", func() *snapv1.SnapshotPolicy {
			p := pol([]snapv1.Source{selSrc}, "r")
			p.Spec.GroupBy = snapv1.GroupByNone
			return p
		}(), map[int][]string{0: {"a", "b"}}, 2, func(t *testing.T, cs []Child) {
			if cs[0].Source.Group != nil || cs[1].Source.Group != nil {
				t.Error("groupBy None must not group")
			}
		}},
		{"copyMethod Direct: grouped, since a volume policy may snapshot a member", func() *snapv1.SnapshotPolicy {
			p := pol([]snapv1.Source{selSrc}, "r")
			p.Spec.CopyMethod = snapv1.CopyDirect
			return p
		}(), map[int][]string{0: {"a", "b"}}, 2, func(t *testing.T, cs []Child) {
			if cs[0].Source.Group == nil {
				t.Error("a Direct policy's members must still name their group")
			}
		}},
		{"copyMethod Clone (groupBy None is required): no group", func() *snapv1.SnapshotPolicy {
			p := pol([]snapv1.Source{selSrc}, "r")
			p.Spec.CopyMethod = snapv1.CopyClone
			return p
		}(), map[int][]string{0: {"a", "b"}}, 2, func(t *testing.T, cs []Child) {
			if cs[0].Source.Group != nil {
				t.Error("Clone must not group")
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs, err := Children(c.p, base, c.selected)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != c.want {
				t.Fatalf("%d children, want %d: %+v", len(cs), c.want, cs)
			}
			seen := map[string]bool{}
			for _, ch := range cs {
				if len(ch.Name) > 63 || seen[ch.Name] {
					t.Errorf("bad or duplicate name %q", ch.Name)
				}
				seen[ch.Name] = true
			}
			if c.check != nil {
				c.check(t, cs)
			}
			again, _ := Children(c.p, base, c.selected)
			for i := range again {
				if again[i].Name != cs[i].Name {
					t.Fatal("names must be deterministic")
				}
			}
		})
	}
}

func TestCapAndLongNames(t *testing.T) {
	var many []string
	for i := 0; i < 201; i++ {
		many = append(many, fmt.Sprintf("pvc-%03d", i))
	}
	_, err := Children(pol([]snapv1.Source{selSrc}, "r1", "r2"), "b", map[int][]string{0: many})
	var tooMany ErrTooMany
	if !errors.As(err, &tooMany) || tooMany.N != 402 {
		t.Fatalf("err = %v, want ErrTooMany{402}", err)
	}
	long := strings.Repeat("x", 60)
	cs, err := Children(pol([]snapv1.Source{selSrc}, long+"1", long+"2"), Base(long, time.Unix(0, 0)), map[int][]string{0: {long + "a", long + "b"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range cs {
		if len(c.Name) > 63 || seen[c.Name] {
			t.Fatalf("name %q (len %d) clipped into a collision or over 63", c.Name, len(c.Name))
		}
		seen[c.Name] = true
	}
	nfs := snapv1.Source{NFS: &snapv1.NFSExport{Server: "s", Path: "/p"}}
	cs, err = Children(pol([]snapv1.Source{nfs}, "r1", "r2"), "b", nil)
	if err != nil || len(cs) != 2 || cs[0].Source != nil || cs[0].Repository == nil || cs[0].Name == cs[1].Name {
		t.Fatalf("an nfs policy's only source: %+v, %v; want one unpinned child per repository", cs, err)
	}
	if _, err := Children(pol([]snapv1.Source{nfs, {PVC: &snapv1.LocalObjectRef{Name: "a"}}}, "r"), "b", nil); err == nil {
		t.Fatal("an nfs source beside another must be refused: a Snapshot cannot pin it")
	}
	stream := snapv1.Source{Stream: &snapv1.StreamSource{FileName: "db.sql"}}
	cs, err = Children(pol([]snapv1.Source{stream}, "r"), "b", nil)
	if err != nil || len(cs) != 1 || cs[0].Source != nil {
		t.Fatalf("a stream policy's only source: %+v, %v; want one unpinned child", cs, err)
	}
	if _, err := Children(pol([]snapv1.Source{stream, {PVC: &snapv1.LocalObjectRef{Name: "a"}}}, "r"), "b", nil); err == nil {
		t.Fatal("a stream source beside another must be refused: a Snapshot cannot pin it")
	}
}

func TestGroupName(t *testing.T) {
	long := strings.Repeat("a-very-long-policy-name-", 4) + "20261206120000"
	cases := []struct {
		name string
		base string
		idx  int32
		repo string
	}{
		{"short", "db-20261206120000", 0, ""},
		{"clipped", long, 3, "ns/repo"},
		{"odd characters", "DB_Policy.x-20261206120000", 1, ""},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := GroupName(c.base, c.idx, c.repo)
			if len(n) > 63 || strings.Trim(n, "-") != n || nonDNS.MatchString(n) {
				t.Fatalf("GroupName(%q) = %q is not a valid DNS label", c.base, n)
			}
			if seen[n] {
				t.Fatalf("GroupName(%q) = %q collides", c.base, n)
			}
			seen[n] = true
			if GroupName(c.base, c.idx, c.repo) != n {
				t.Fatal("GroupName is not deterministic")
			}
		})
	}
	if GroupName("b", 0, "r1") == GroupName("b", 0, "r2") || GroupName("b", 0, "") == GroupName("b", 1, "") {
		t.Fatal("each repository and each source must get its own group")
	}
}
