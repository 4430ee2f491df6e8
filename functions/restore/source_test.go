package restore

import (
	"context"
	"strings"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

type reviewer struct {
	allowed map[string]bool
	asked   []string
}

func (r *reviewer) Create(_ context.Context, sar *authzv1.SubjectAccessReview, _ metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	a := sar.Spec.ResourceAttributes
	key := sar.Spec.User + " " + a.Verb + " " + a.Resource + " " + a.Namespace
	r.asked = append(r.asked, key)
	sar.Status.Allowed = r.allowed[key]
	return sar, nil
}

// A Restore reads a source in another namespace with the function's rights
// only while the user who wrote it may read that source themselves.
func TestSourceInAnotherNamespaceNeedsTheAuthorsRights(t *testing.T) {
	snapRef := snapv1.RestoreSource{SnapshotRef: &snapv1.NamespacedObjectRef{Name: "first", Namespace: "payroll"}}
	policyRef := snapv1.RestoreSource{FromPolicy: &snapv1.FromPolicy{Name: "app", Namespace: "payroll"}}
	own := snapv1.RestoreSource{SnapshotRef: &snapv1.NamespacedObjectRef{Name: "first", Namespace: "billing"}}
	tests := []struct {
		name    string
		src     snapv1.RestoreSource
		author  string
		allowed []string
		want    string // in the refusal; "" when the source may be read
		asks    int
	}{
		{name: "own namespace spelled out: nothing to check", src: own, want: ""},
		{name: "another namespace's Snapshot, author may read it", src: snapRef, author: "ann", allowed: []string{"ann get snapshots payroll"}, asks: 1},
		{name: "another namespace's Snapshot, author may not", src: snapRef, author: "ann", want: `ann may not get snapshots in namespace "payroll"`, asks: 1},
		{name: "another namespace's policy, author may read both", src: policyRef, author: "ann", allowed: []string{"ann get snapshotpolicies payroll", "ann list snapshots payroll"}, asks: 2},
		{name: "another namespace's policy, author may not list its Snapshots", src: policyRef, author: "ann", allowed: []string{"ann get snapshotpolicies payroll"}, want: `ann may not list snapshots in namespace "payroll"`, asks: 2},
		{name: "no recorded author", src: snapRef, want: "delete the Restore and create it again", asks: 0},
		{name: "written by snapflow itself", src: snapRef, author: "system:serviceaccount:snapflow-system:snapflow-restore", allowed: []string{"system:serviceaccount:snapflow-system:snapflow-restore get snapshots payroll"}, want: "an account of snapflow itself", asks: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := &snapv1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "billing", Name: "r"}, Spec: snapv1.RestoreSpec{Source: tc.src}}
			if tc.author != "" {
				rs.Annotations = map[string]string{wellknown.AnnotationExecAuthor: `{"username":"` + tc.author + `"}`}
			}
			rev := &reviewer{allowed: map[string]bool{}}
			for _, k := range tc.allowed {
				rev.allowed[k] = true
			}
			f := &Function{Namespace: "snapflow-system", Access: rev}
			msg, err := f.sourceRefused(context.Background(), rs)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" && msg != "" || tc.want != "" && !strings.Contains(msg, tc.want) {
				t.Errorf("refusal %q, want %q", msg, tc.want)
			}
			if len(rev.asked) != tc.asks {
				t.Errorf("asked %v, want %d reviews", rev.asked, tc.asks)
			}
		})
	}
}
