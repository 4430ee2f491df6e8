package snapshot

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/internal/scheme"
)

type allowOnly string

func (a allowOnly) Create(_ context.Context, sar *authzv1.SubjectAccessReview, _ metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	out := sar.DeepCopy()
	out.Status.Allowed = sar.Spec.User == string(a) && sar.Spec.ResourceAttributes.Resource == "snapshots" && sar.Spec.ResourceAttributes.Namespace == "app"
	return out, nil
}

func TestSnapshotRequestEvents(t *testing.T) {
	ctx := context.Background()
	pol := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db"},
		Spec: snapv1.SnapshotPolicySpec{Repository: &snapv1.RepositoryRef{Name: "primary"}, Sources: []snapv1.Source{{PVC: &snapv1.LocalObjectRef{Name: "data"}}}}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pol).WithStatusSubresource(pol).Build()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	f := &Function{Client: c, Access: allowOnly("ci"), Now: func() time.Time { return now }}
	as := func(user string) context.Context {
		return host.WithSender(ctx, host.Sender{User: authnv1.UserInfo{Username: user}})
	}
	request := func(id string, at time.Time) event.Event {
		e := event.New()
		e.SetID(id)
		e.SetSource("ci/pipeline")
		e.SetType(events.SnapshotRequested)
		e.SetTime(at)
		_ = e.SetData(event.ApplicationJSON, events.SnapshotRequest{Namespace: "app", Policy: "db"})
		return e
	}
	snaps := func() []snapv1.Snapshot {
		var l snapv1.SnapshotList
		if err := c.List(ctx, &l, client.InNamespace("app")); err != nil {
			t.Fatal(err)
		}
		return l.Items
	}

	if err := f.Handle(as("intruder"), request("1", now)); !errors.Is(err, host.ErrForbidden) {
		t.Fatalf("a sender without create on snapshots: %v, want forbidden", err)
	}
	if n := len(snaps()); n != 0 {
		t.Fatalf("a refused request minted %d Snapshots", n)
	}
	// A forged ce-time a year back does not name (or date) the firing.
	if err := f.Handle(as("ci"), request("1", now.AddDate(-1, 0, 0))); err != nil {
		t.Fatal(err)
	}
	if err := f.Handle(as("ci"), request("1", now.AddDate(-1, 0, 0))); err != nil {
		t.Fatalf("a redelivery: %v", err)
	}
	got := snaps()
	if len(got) != 1 || got[0].Annotations[wellknown.AnnotationRequestedBy] != "ci" || got[0].Annotations[wellknown.AnnotationRequestEvent] != "ci/pipeline 1" {
		t.Fatalf("want one Snapshot recording its sender and event, got %+v", got)
	}
	// Another request within the interval is refused, not retried; so is
	// the same id from another source (it is another event).
	if err := f.Handle(as("ci"), request("2", now)); err == nil || !events.IsClientError(err) {
		t.Fatalf("a second request within the interval: %v, want a refusal", err)
	}
	other := request("1", now)
	other.SetSource("elsewhere")
	if err := f.Handle(as("ci"), other); err == nil || !events.IsClientError(err) {
		t.Fatalf("the same id from another source within the interval: %v, want a refusal", err)
	}
	// The fake API server stamps no creation time; the real one would.
	stamp := func() {
		for _, sn := range snaps() {
			if sn.CreationTimestamp.IsZero() {
				sn.CreationTimestamp = metav1.NewTime(now)
				if err := c.Update(ctx, &sn); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	stamp()
	now = now.Add(2 * DefaultRequestInterval)
	if err := f.Handle(as("ci"), request("2", now)); err != nil {
		t.Fatalf("a request after the interval: %v", err)
	}
	if n := len(snaps()); n != 2 {
		t.Fatalf("%d Snapshots, want 2", n)
	}

	// Two requests that both read the policy before either fired (two
	// deliveries at once, or two replicas): the claim lets one through.
	stamp()
	now = now.Add(2 * DefaultRequestInterval)
	var p1, p2 snapv1.SnapshotPolicy
	for _, p := range []*snapv1.SnapshotPolicy{&p1, &p2} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pol), p); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.requestAllowed(ctx, &p1, "ci/pipeline 3"); err != nil {
		t.Fatalf("the first of two racing requests: %v", err)
	}
	err := f.requestAllowed(ctx, &p2, "ci/pipeline 4")
	if !apierrors.IsConflict(err) {
		t.Fatalf("the second of two racing requests: %v, want a conflict (retried, then refused)", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pol), &p2); err != nil {
		t.Fatal(err)
	}
	if err := f.requestAllowed(ctx, &p2, "ci/pipeline 4"); err == nil || !events.IsClientError(err) {
		t.Fatalf("the retried loser: %v, want a refusal within the interval", err)
	}
	// Through claimRequest, the loser re-reads and is refused at once.
	now = now.Add(2 * DefaultRequestInterval)
	var stale, fresh snapv1.SnapshotPolicy
	for _, p := range []*snapv1.SnapshotPolicy{&stale, &fresh} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pol), p); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.claimRequest(ctx, &fresh, "ci/pipeline 6"); err != nil {
		t.Fatal(err)
	}
	if err := f.claimRequest(ctx, &stale, "ci/pipeline 7"); err == nil || !events.IsClientError(err) {
		t.Fatalf("a stale loser through claimRequest: %v, want a refusal", err)
	}

	// A stamp written into the future (by whoever may write status in the
	// namespace) does not turn requests off for good.
	now = now.Add(2 * DefaultRequestInterval)
	stamp()
	var cur snapv1.SnapshotPolicy
	if err := c.Get(ctx, client.ObjectKeyFromObject(pol), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Status.LastRequest = &snapv1.RequestStamp{Event: "forged", At: metav1.NewTime(now.AddDate(10, 0, 0))}
	if err := c.Status().Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	if err := f.claimRequest(ctx, &cur, "ci/pipeline 8"); err != nil {
		t.Fatalf("a future stamp blocked a request: %v", err)
	}
	if err := f.requestAllowed(ctx, &p2, "ci/pipeline 3"); err != nil {
		t.Fatalf("the winner's redelivery: %v", err)
	}
}
