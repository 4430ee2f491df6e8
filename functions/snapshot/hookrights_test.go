package snapshot

import (
	"context"
	"strings"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/scheme"
)

// reviewer allows what allowed lists ("user verb resource"), and records
// what it was asked.
type reviewer struct {
	allowed map[string]bool
	asked   []string
}

func (r *reviewer) Create(_ context.Context, sar *authzv1.SubjectAccessReview, _ metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	a := sar.Spec.ResourceAttributes
	key := sar.Spec.User + " " + a.Verb + " " + strings.TrimSuffix(a.Resource+"/"+a.Subresource, "/") + " " + a.Namespace
	r.asked = append(r.asked, key)
	sar.Status.Allowed = r.allowed[key]
	return sar, nil
}

// runJob and workloadExec hooks run with the rights of whoever set them: the
// Job or exec the function would make is refused when that user may not.
func TestHooksNeedTheirAuthorsRights(t *testing.T) {
	ctx := context.Background()
	const ns = "app"
	tests := []struct {
		name    string
		exec    bool
		execOff bool // the operator has not turned workloadExec hooks on
		author  string
		allowed bool
		want    string // in the failure; "" when the hook Job is created
	}{
		{"an author who may create Jobs", false, false, `{"username":"ops"}`, true, ""},
		{"an author who may not", false, false, `{"username":"ops"}`, false, "ops may not create jobs in namespace \"app\""},
		{"no recorded author", false, false, "", false, "does not record who set its runJob and workloadExec hooks"},
		{"an exec hook's author who may not exec", true, false, `{"username":"ops"}`, false, "ops may not create pods/exec in namespace \"app\""},
		{"an exec hook where the operator has not turned them on", true, true, `{"username":"ops"}`, true, "functions.snapshot.workloadExecHooks=true"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-data"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
			objs := oneRunFixture(ns, pvc)
			for _, o := range objs {
				if p, ok := o.(*snapv1.SnapshotPolicy); ok {
					h := snapv1.Hook{RunJob: &snapv1.RunJobHook{JobSpec: batchv1.JobSpec{
						Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "h", Image: "busybox"}}}}}}}
					if tc.exec {
						h = snapv1.Hook{WorkloadExec: &snapv1.WorkloadExecHook{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, Command: []string{"sync"}}}
					}
					p.Spec.Hooks = &snapv1.Hooks{BeforeSnapshot: []snapv1.Hook{h}}
					if tc.author != "" {
						p.Annotations = map[string]string{wellknown.AnnotationHooksAuthor: tc.author}
					}
				}
			}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
				WithStatusSubresource(&snapv1.Snapshot{}, &snapv1.Repository{}).Build()
			rev := &reviewer{allowed: map[string]bool{"ops create jobs app": tc.allowed}}
			f := &Function{Client: c, Namespace: "snapflow-system", MoverImage: "img", Access: rev, WorkloadExecHooks: !tc.execOff}
			if err := f.ReconcileSnapshot(ctx, ns, "s1"); err != nil {
				t.Fatal(err)
			}
			var jobs batchv1.JobList
			if err := c.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelOp: "hook"}); err != nil {
				t.Fatal(err)
			}
			var s snapv1.Snapshot
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s1"}, &s); err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if len(jobs.Items) != 1 {
					t.Fatalf("%d hook Jobs, want 1 (asked %v, status %+v)", len(jobs.Items), rev.asked, s.Status)
				}
				// No cap is set, yet the run says it started before its
				// hooks did, so a schedule's Replace waits for it.
				if _, ok := Starting(&s); !ok {
					t.Fatalf("a run in its hooks does not count as starting: %+v", s.Status.Conditions)
				}
				return
			}
			if len(jobs.Items) != 0 {
				t.Fatalf("%d hook Jobs created for an author without the rights", len(jobs.Items))
			}
			if f := s.Status.Failure; s.Status.Phase != snapv1.SnapshotFailed || f == nil || !strings.Contains(f.Message, tc.want) {
				t.Fatalf("phase %s failure %+v, want Failed with %q", s.Status.Phase, s.Status.Failure, tc.want)
			}
		})
	}
}
