package mutate

import (
	"encoding/json"
	"reflect"
	"testing"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

func ops(t *testing.T, got []jsonpatch.Operation) string {
	t.Helper()
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSnapshot(t *testing.T) {
	now := metav1.Now()
	base := func() *snapv1.Snapshot {
		return &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "billing"},
			Spec: snapv1.SnapshotSpec{PolicyRef: &snapv1.PolicyRef{Name: "pg"}}}
	}
	tests := []struct {
		name   string
		mutate func(*snapv1.Snapshot)
		op     Operation
		policy snapv1.DeletionPolicy
		want   string
	}{
		{"manual create", func(*snapv1.Snapshot) {}, Create, "",
			`[{"op":"add","path":"/spec/deletionPolicy","value":"Delete"},{"op":"add","path":"/metadata/finalizers","value":["kopiur.home-operations.com/snapshot-cleanup"]},{"op":"add","path":"/metadata/labels","value":{"kopiur.home-operations.com/config":"pg"}}]`},
		{"recipe default wins over Delete", func(*snapv1.Snapshot) {}, Create, snapv1.DeletionRetain,
			`[{"op":"add","path":"/spec/deletionPolicy","value":"Retain"},{"op":"add","path":"/metadata/finalizers","value":["kopiur.home-operations.com/snapshot-cleanup"]},{"op":"add","path":"/metadata/labels","value":{"kopiur.home-operations.com/config":"pg"}}]`},
		{"discovered is Retain and unlabelled", func(s *snapv1.Snapshot) {
			s.Labels = map[string]string{wellknown.LabelOrigin: "discovered"}
		}, Create, snapv1.DeletionDelete,
			`[{"op":"add","path":"/spec/deletionPolicy","value":"Retain"},{"op":"add","path":"/metadata/finalizers","value":["kopiur.home-operations.com/snapshot-cleanup"]}]`},
		{"existing labels and finalizers are appended to", func(s *snapv1.Snapshot) {
			s.Labels = map[string]string{"team": "payments"}
			s.Finalizers = []string{"other/finalizer"}
			s.Spec.DeletionPolicy = snapv1.DeletionRetain
		}, Create, "",
			`[{"op":"add","path":"/metadata/finalizers/-","value":"kopiur.home-operations.com/snapshot-cleanup"},{"op":"add","path":"/metadata/labels/kopiur.home-operations.com~1config","value":"pg"}]`},
		{"nothing to do", func(s *snapv1.Snapshot) {
			s.Labels = map[string]string{wellknown.LabelConfig: "custom"}
			s.Finalizers = []string{wellknown.FinalizerSnapshotCleanup}
			s.Spec.DeletionPolicy = snapv1.DeletionOrphan
		}, Create, "", `null`},
		{"no label on update", func(s *snapv1.Snapshot) {
			s.Finalizers = []string{wellknown.FinalizerSnapshotCleanup}
			s.Spec.DeletionPolicy = snapv1.DeletionDelete
		}, Update, "", `null`},
		{"never a finalizer while deleting", func(s *snapv1.Snapshot) {
			s.DeletionTimestamp = &now
			s.Spec.DeletionPolicy = snapv1.DeletionDelete
		}, Update, "", `null`},
		{"policy in another namespace gets no label", func(s *snapv1.Snapshot) {
			s.Spec.PolicyRef.Namespace = "elsewhere"
			s.Finalizers = []string{wellknown.FinalizerSnapshotCleanup}
			s.Spec.DeletionPolicy = snapv1.DeletionDelete
		}, Create, "", `null`},
		{"unknown origin is left alone", func(s *snapv1.Snapshot) {
			s.Labels = map[string]string{wellknown.LabelOrigin: "imported"}
		}, Create, "", `null`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.mutate(s)
			if got := ops(t, Snapshot(s, tc.op, tc.policy)); got != tc.want {
				t.Fatalf("patch =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestSnapshotPolicyIgnoreRules(t *testing.T) {
	p := &snapv1.SnapshotPolicy{}
	got := SnapshotPolicy(p)
	if len(got) != 1 || got[0].Path != "/spec/files" {
		t.Fatalf("omitted files: %v", got)
	}
	want := map[string]any{"ignoreRules": wellknown.DefaultIgnoreRules}
	if !reflect.DeepEqual(got[0].Value, want) {
		t.Fatalf("value = %v", got[0].Value)
	}
	p.Spec.Files = &snapv1.Files{}
	if got := SnapshotPolicy(p); len(got) != 1 || got[0].Path != "/spec/files/ignoreRules" {
		t.Fatalf("files without ignoreRules: %v", got)
	}
	p.Spec.Files.IgnoreRules = []string{}
	if got := SnapshotPolicy(p); got != nil {
		t.Fatalf("an explicit [] opts out, got %v", got)
	}
	p.Spec.Files.IgnoreRules = []string{"*.tmp"}
	if got := SnapshotPolicy(p); got != nil {
		t.Fatalf("an explicit list replaces the default, got %v", got)
	}
}
