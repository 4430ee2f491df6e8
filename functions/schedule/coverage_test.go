package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/internal/coverage"
	"github.com/snapflow/snapflow/internal/scheme"
)

type failingEmitter struct{ err error }

func (f failingEmitter) Emit(context.Context, event.Event) error { return f.err }

// A PVC nothing backs up is told once it has been unprotected for the
// grace, once per spell, across passes, replicas (the record) and a sink
// that was down; a pass runs at most once per CoverageEvery.
func TestAnUnprotectedPVCIsToldOncePerSpell(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	now := t0
	pvc := func(name string, ann map[string]string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: k8stypes.UID("uid-" + name), Annotations: ann}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(pvc("forgotten", nil), pvc("scratch", map[string]string{"snapflow.dev/backup-not-required": "true"})).Build()
	var out emitted
	f := &Function{Client: c, Now: func() time.Time { return now }, Emitter: &out, Namespace: "snapflow-system"}
	told := func() []string {
		var ids []string
		for _, e := range out {
			if e.Type() == events.CoverageUnprotected {
				ids = append(ids, e.ID())
			}
		}
		return ids
	}
	pass := func(at time.Time) {
		t.Helper()
		now = at
		f.coveragePass(ctx)
	}
	pass(t0)
	if len(told()) != 0 {
		t.Fatalf("told at first sight: %v", told())
	}
	// Before the grace, and too soon for another pass: nothing.
	pass(t0.Add(2 * time.Minute))
	pass(t0.Add(55 * time.Minute))
	if len(told()) != 0 {
		t.Fatalf("told within the grace: %v", told())
	}
	// A sink that is down: not marked, told at the next pass.
	f.Emitter = failingEmitter{errors.New("sink down")}
	pass(t0.Add(61 * time.Minute))
	f.Emitter = &out
	pass(t0.Add(62 * time.Minute)) // not due yet
	if len(told()) != 0 {
		t.Fatalf("told while the sink was down, or by a pass that was not due: %v", told())
	}
	pass(t0.Add(70 * time.Minute))
	since := t0
	want := "uid-forgotten/unprotected/" + strconv.FormatInt(since.Unix(), 10)
	if ids := told(); len(ids) != 1 || ids[0] != want {
		t.Fatalf("told %v, want [%s]", ids, want)
	}
	var data events.CoverageUnprotectedData
	if err := json.Unmarshal(out[len(out)-1].Data(), &data); err != nil || data.PVC != "forgotten" || data.Since != since.Format(time.RFC3339) ||
		!strings.Contains(data.Message, "snapflow coverage -n apps") || data.Reason != "no SnapshotPolicy covers it" {
		t.Fatalf("data %+v (%v)", data, err)
	}
	// Told once, though it stays unprotected.
	pass(t0.Add(2 * time.Hour))
	pass(t0.Add(3 * time.Hour))
	if len(told()) != 1 {
		t.Fatalf("told again in the same spell: %v", told())
	}
	// Excluded, then unprotected again: a new spell, told after its grace.
	var p corev1.PersistentVolumeClaim
	if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "forgotten"}, &p); err != nil {
		t.Fatal(err)
	}
	p.Annotations = map[string]string{"snapflow.dev/backup-not-required": "for now"}
	if err := c.Update(ctx, &p); err != nil {
		t.Fatal(err)
	}
	pass(t0.Add(4 * time.Hour))
	p.Annotations = nil
	if err := c.Update(ctx, &p); err != nil {
		t.Fatal(err)
	}
	pass(t0.Add(5 * time.Hour))
	pass(t0.Add(6 * time.Hour))
	if ids := told(); len(ids) != 2 || ids[1] == ids[0] {
		t.Fatalf("a new spell: told %v", ids)
	}
	// The record says what is open, in the functions' namespace.
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: "snapflow-system", Name: CoverageRecord}, &cm); err != nil {
		t.Fatal(err)
	}
	tr, err := coverage.DecodeTracked([]byte(cm.Data[coverageKey]))
	if err != nil || len(tr.Spells) != 1 || !tr.Spells["uid-forgotten"].Announced {
		t.Fatalf("record %+v (%v)", tr, err)
	}
	// Without a namespace, or with passes turned off, nothing is judged.
	for _, off := range []*Function{{Client: c, Emitter: &out}, {Client: c, Emitter: &out, Namespace: "x", CoverageEvery: -1}} {
		off.coveragePass(ctx)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "x", Name: CoverageRecord}, &cm); err == nil {
		t.Fatal("a disabled pass wrote a record")
	}
}

// A pass whose claim loses to another pass (a replica, an overlapping
// event) judges and tells nothing; a failed read tells nothing and still
// waits the pass interval; neither fails the tick.
func TestACoveragePassTellsOnlyAfterItsClaim(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	rec, err := coverage.Tracked{LastPass: t0.Add(-10 * time.Minute), Spells: map[k8stypes.UID]coverage.Spell{
		"uid-forgotten": {Namespace: "apps", PVC: "forgotten", UID: "uid-forgotten", Since: t0.Add(-2 * time.Hour)}}}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "forgotten", UID: "uid-forgotten"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "snapflow-system", Name: CoverageRecord}, Data: map[string]string{coverageKey: string(rec)}},
	}
	lose := interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
		return apierrors.NewConflict(corev1.Resource("configmaps"), obj.GetName(), errors.New("another pass wrote first"))
	}}
	var out emitted
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithInterceptorFuncs(lose).Build()
	f := &Function{Client: c, Now: func() time.Time { return t0 }, Emitter: &out, Namespace: "snapflow-system"}
	f.coveragePass(ctx)
	if len(out) != 0 {
		t.Fatalf("a pass that lost its claim told %d events", len(out))
	}
	// A global ConfigMap that cannot be read: the pass is claimed, tells
	// nothing, and the next comes after the interval.
	c = fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	f = &Function{Client: c, Now: func() time.Time { return t0 }, Emitter: &out, Namespace: "snapflow-system", GlobalVolumePolicies: "snapflow-system/missing"}
	f.coveragePass(ctx)
	if len(out) != 0 {
		t.Fatalf("a pass that could not judge told %d events", len(out))
	}
	f.GlobalVolumePolicies = ""
	f.coveragePass(ctx) // not due yet
	if len(out) != 0 {
		t.Fatalf("a pass ran again within the interval: %d events", len(out))
	}
	f.Now = func() time.Time { return t0.Add(DefaultCoverageEvery) }
	f.coveragePass(ctx)
	if len(out) != 1 || out[0].Type() != events.CoverageUnprotected {
		t.Fatalf("told %d events after the interval, want the open spell", len(out))
	}
}
