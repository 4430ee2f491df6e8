package admission_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/admission"
	"github.com/snapflow/snapflow/internal/validate"
	"github.com/snapflow/snapflow/internal/volumepolicy"
)

type noPolicies struct{}

func (noPolicies) Resolve(context.Context, *snapv1.SnapshotPolicy) (*volumepolicy.Stamp, error) {
	return nil, nil
}

// Where no volume policy applies, a stamp the user wrote on a new Snapshot
// is removed: only admission's own stamp steers the run.
func TestMutateDropsABroughtVolumePolicyStamp(t *testing.T) {
	s := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "billing",
		Annotations: map[string]string{wellknown.AnnotationVolumePolicies: `{"rules":[{"action":{"type":"skip"}}]}`}},
		Spec: snapv1.SnapshotSpec{PolicyRef: &snapv1.PolicyRef{Name: "p"}}}
	ops, _, err := admission.Mutate(context.Background(), validate.NewObjects(), noPolicies{}, admission.Create, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if op.Operation == "remove" && op.Path == "/metadata/annotations/snapflow.dev~1volume-policies" {
			return
		}
	}
	t.Fatalf("the brought stamp stays: %v", ops)
}

type ignoringGlobal struct{}

func (ignoringGlobal) Resolve(context.Context, *snapv1.SnapshotPolicy) (*volumepolicy.Stamp, error) {
	return &volumepolicy.Stamp{Global: &volumepolicy.SourceRef{ConfigMap: "snapflow-system/global"}, Rules: []volumepolicy.Rule{},
		Ignored: []string{"includeExcludePolicy"}}, nil
}

// Each new Snapshot is told that the global document carries sections that
// never apply globally, not only the log at start-up.
func TestMutateWarnsOfIgnoredGlobalSections(t *testing.T) {
	s := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "billing"},
		Spec: snapv1.SnapshotSpec{PolicyRef: &snapv1.PolicyRef{Name: "p"}}}
	_, warnings, err := admission.Mutate(context.Background(), validate.NewObjects(), ignoringGlobal{}, admission.Create, s, nil)
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "snapflow-system/global carries includeExcludePolicy") {
		t.Fatalf("warnings %q (%v)", warnings, err)
	}
}
