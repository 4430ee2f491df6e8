package volumegroup

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestSnapshotHandles(t *testing.T) {
	for _, field := range []string{"volumeSnapshotInfoList", "volumeSnapshotHandlePairList"} {
		c := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{field: []any{
			map[string]any{"volumeHandle": "v1", "snapshotHandle": "s1"},
			map[string]any{"volumeHandle": "v2", "snapshotHandle": "s2"},
			map[string]any{"volumeHandle": "", "snapshotHandle": "s3"},
		}}}}
		got := SnapshotHandles(c)
		if len(got) != 2 || got["v1"] != "s1" || got["v2"] != "s2" {
			t.Fatalf("%s: got %v", field, got)
		}
	}
}

func TestFind(t *testing.T) {
	handles := map[string]string{"vol-a": "snap-a", "vol-b": "snap-b"}
	members := []Member{{Name: "m-a", SnapshotHandle: "snap-a", Ready: true}, {Name: "m-b", SnapshotHandle: "snap-b"}}
	cases := []struct {
		name    string
		handle  string
		members []Member
		want    string
		pending bool
		errHas  string
	}{
		{name: "member found", handle: "vol-a", members: members, want: "m-a"},
		{name: "second member", handle: "vol-b", members: members, want: "m-b"},
		{name: "no csi handle", handle: "", members: members, errHas: "no CSI volume handle"},
		{name: "volume not in the group", handle: "vol-c", members: members, errHas: "does not cover"},
		{name: "member not made yet", handle: "vol-b", members: members[:1], pending: true},
		{name: "two members claim one snapshot", handle: "vol-a", members: append(members, Member{Name: "m-x", SnapshotHandle: "snap-a"}), errHas: "refusing to guess"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Find("g", handles, c.handle, c.members)
			switch {
			case c.want != "":
				if err != nil || m.Name != c.want {
					t.Fatalf("got %v, %v; want %s", m, err, c.want)
				}
			case c.pending:
				if !errors.Is(err, ErrPending) {
					t.Fatalf("got %v; want ErrPending", err)
				}
			default:
				if err == nil || errors.Is(err, ErrPending) || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("got %v; want a final error containing %q", err, c.errHas)
				}
			}
		})
	}
}

func TestMembers(t *testing.T) {
	vols := map[string]Volume{
		"a": {Bound: true, Driver: "ebs"}, "b": {Bound: true, Driver: "ebs"}, "pending": {Bound: false, Driver: ""},
		"nfs": {Bound: true}, "other": {Bound: true, Driver: "efs"}, "contested": {Bound: true, Driver: "ebs"},
	}
	got := Members([]string{"a", "b", "pending", "nfs", "other", "contested", "gone"}, map[string]bool{"contested": true}, vols, "ebs")
	if strings.Join(got, ",") != "a,b" {
		t.Fatalf("members %v, want a,b", got)
	}
	if got := Members([]string{"nfs"}, nil, vols, ""); len(got) != 0 {
		t.Fatalf("a non-CSI cutter groups nothing: %v", got)
	}
}
