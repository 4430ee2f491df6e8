package cleanup

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/internal/scheme"
)

type recorded struct{ ids []string }

func (r *recorded) Emit(_ context.Context, e event.Event) error {
	if e.Type() == events.DeletionHeld {
		r.ids = append(r.ids, e.ID())
	}
	return nil
}

// A hold is announced once when it starts and again only when its reason
// changes, however often a pass finds it still held.
func TestDeletionHeldIsAnnouncedOncePerHold(t *testing.T) {
	ctx := context.Background()
	now := metav1.NewTime(time.Now())
	s := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "s1", UID: "uid-1", DeletionTimestamp: &now, Finalizers: []string{"x"}}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(s).WithStatusSubresource(&snapv1.Snapshot{}).Build()
	rec := &recorded{}
	f := &Function{Client: c, Emitter: rec}
	read := func() *snapv1.Snapshot {
		var got snapv1.Snapshot
		if err := c.Get(ctx, client.ObjectKeyFromObject(s), &got); err != nil {
			t.Fatal(err)
		}
		return &got
	}
	for _, step := range []struct {
		held   metav1.ConditionStatus
		reason string
		want   int
	}{
		{metav1.ConditionFalse, "RepositoryMissing", 1},
		{metav1.ConditionFalse, "RepositoryMissing", 1},
		{metav1.ConditionFalse, "RepositoryDegraded", 2},
		{metav1.ConditionTrue, "MassDeletionBreaker", 3},
		{metav1.ConditionTrue, "MassDeletionBreaker", 3},
	} {
		if err := f.markDeleting(ctx, read(), step.held, step.reason, "why"); err != nil {
			t.Fatal(err)
		}
		if len(rec.ids) != step.want {
			t.Fatalf("after %s %s: %d events %v, want %d", step.held, step.reason, len(rec.ids), rec.ids, step.want)
		}
	}
	if !strings.HasPrefix(rec.ids[0], "uid-1/held/RepositoryMissing/") || !strings.HasPrefix(rec.ids[1], "uid-1/held/RepositoryDegraded/") || rec.ids[0] == rec.ids[1] {
		t.Fatalf("event ids %v: want one id per hold", rec.ids)
	}
}
