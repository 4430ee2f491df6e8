package snapshot

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/egress"
	"github.com/snapflow/snapflow/internal/scheme"
)

// A running Clone run resumes its workload once its cloned PVC is bound,
// not when its upload ends; never from a PVC it did not make, and once.
func TestACloneThawsOnceItsCopyIsBound(t *testing.T) {
	ctx := context.Background()
	var thaws atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { thaws.Add(1) }))
	defer srv.Close()
	quiesced := metav1.NewTime(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	now := quiesced.Add(90 * time.Second)
	for _, tc := range []struct {
		name         string
		phase        corev1.PersistentVolumeClaimPhase
		owned        bool
		wantThawed   bool
		wantQuiesced time.Duration
	}{
		{"bound", corev1.ClaimBound, true, true, 90 * time.Second},
		{"not bound yet", corev1.ClaimPending, true, false, 0},
		{"bound but not this run's", corev1.ClaimBound, false, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			thaws.Store(0)
			objs := oneRunFixture("app", &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "data"}})
			pol := objs[3].(*snapv1.SnapshotPolicy)
			pol.Spec.CopyMethod = snapv1.CopyClone
			pol.Spec.Hooks = &snapv1.Hooks{BeforeSnapshot: []snapv1.Hook{{HTTPRequest: &snapv1.HTTPRequestHook{URL: srv.URL + "/freeze"}}},
				AfterSnapshot: []snapv1.Hook{{HTTPRequest: &snapv1.HTTPRequestHook{URL: srv.URL + "/thaw", Timeout: "5s"}}}}
			s := objs[4].(*snapv1.Snapshot)
			s.Status = snapv1.SnapshotStatus{Phase: snapv1.SnapshotRunning,
				Staged: &snapv1.Staged{CopyMethod: snapv1.CopyClone, PVCName: stagedName(s), Ready: true},
				Hooks:  &snapv1.HookStamps{PreCompletedAt: &quiesced}}
			clone := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: stagedName(s)}, Status: corev1.PersistentVolumeClaimStatus{Phase: tc.phase}}
			if tc.owned {
				clone.OwnerReferences = []metav1.OwnerReference{ownerRef(s)}
				clone.Labels = map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue}
			}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(append(objs, clone)...).WithStatusSubresource(&snapv1.Snapshot{}).Build()
			f := &Function{Client: c, Namespace: "snapflow-system", Now: func() time.Time { return now },
				HookEgress: egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}
			for range 2 { // a second event thaws nothing more
				var live snapv1.Snapshot
				if err := c.Get(ctx, client.ObjectKeyFromObject(s), &live); err != nil {
					t.Fatal(err)
				}
				if err := f.thawCloned(ctx, &live); err != nil {
					t.Fatal(err)
				}
			}
			var got snapv1.Snapshot
			if err := c.Get(ctx, client.ObjectKeyFromObject(s), &got); err != nil {
				t.Fatal(err)
			}
			thawed := got.Status.Hooks.PostCompletedAt != nil
			if thawed != tc.wantThawed || int(thaws.Load()) != map[bool]int{true: 1}[tc.wantThawed] {
				t.Fatalf("thawed %v after %d calls, want %v", thawed, thaws.Load(), tc.wantThawed)
			}
			if q := got.Status.Hooks.QuiescedFor; tc.wantThawed && (q == nil || q.Duration != tc.wantQuiesced) {
				t.Fatalf("quiescedFor %v, want %s", q, tc.wantQuiesced)
			}
		})
	}
}
