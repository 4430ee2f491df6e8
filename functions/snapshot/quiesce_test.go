package snapshot

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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

// A member skips its hooks only for a group its recorded cutter proves it
// cut under its own hooks; a group it would refuse is refused before any
// hook runs.
func TestGroupCutTrustsOnlyAProvenCutter(t *testing.T) {
	const ns = "app"
	ctx := context.Background()
	served := meta.NewDefaultRESTMapper([]schema.GroupVersion{testVGS.GroupVersion()})
	served.Add(testVGS, meta.RESTScopeNamespace)
	quiesced := metav1.NewTime(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	cutter := func(mutate func(*snapv1.Snapshot)) *snapv1.Snapshot {
		s := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s0", UID: "uid-s0"},
			Spec: snapv1.SnapshotSpec{PolicyRef: &snapv1.PolicyRef{Name: "app"}, Source: &snapv1.SnapshotSource{
				Target: snapv1.SnapshotTarget{PVC: snapv1.PVCTarget{Name: "other"}}, Group: &snapv1.SnapshotGroup{VolumeGroupSnapshotName: "g1"}}},
			Status: snapv1.SnapshotStatus{Hooks: &snapv1.HookStamps{PreCompletedAt: &quiesced}}}
		if mutate != nil {
			mutate(s)
		}
		return s
	}
	group := func(cutBy string, labels map[string]string, owners ...types.UID) *unstructured.Unstructured {
		g := &unstructured.Unstructured{}
		g.SetGroupVersionKind(testVGS)
		g.SetNamespace(ns)
		g.SetName("g1")
		g.SetLabels(labels)
		g.SetCreationTimestamp(metav1.NewTime(quiesced.Add(time.Second)))
		if cutBy != "" {
			g.SetAnnotations(map[string]string{wellknown.AnnotationCutBy: cutBy})
		}
		for _, uid := range owners {
			g.SetOwnerReferences(append(g.GetOwnerReferences(), metav1.OwnerReference{APIVersion: snapv1.GroupVersion.String(), Kind: "Snapshot", Name: string(uid), UID: uid}))
		}
		return g
	}
	ours := map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue, wellknown.LabelVolumeGroup: "g1", wellknown.LabelConfig: "app"}
	for _, tc := range []struct {
		name    string
		mapper  meta.RESTMapper
		objs    []client.Object
		cutBy   string
		refused string
	}{
		{name: "no group API: refused before the hooks", refused: "set groupBy: None"},
		{name: "not cut yet: own hooks", mapper: served},
		{name: "cut by a proven sibling: skip", mapper: served, objs: []client.Object{cutter(nil), group("s0", ours, "uid-s0")}, cutBy: "s0"},
		{name: "no cutter recorded: own hooks", mapper: served, objs: []client.Object{cutter(nil), group("", ours, "uid-s0")}},
		{name: "a cutter that finished and let go of the group: skip", mapper: served, objs: []client.Object{
			cutter(func(s *snapv1.Snapshot) { s.Status.Hooks.PostCompletedAt = ptrTime(quiesced.Add(time.Minute)) }), group("s0", ours)}, cutBy: "s0"},
		{name: "a group made after the cutter resumed the workload: own hooks", mapper: served, objs: []client.Object{
			cutter(func(s *snapv1.Snapshot) { s.Status.Hooks.PostCompletedAt = &quiesced }), group("s0", ours)}},
		{name: "a group made before the cutter's freeze: own hooks", mapper: served, objs: []client.Object{
			cutter(func(s *snapv1.Snapshot) { s.Status.Hooks.PreCompletedAt = ptrTime(quiesced.Add(time.Hour)) }), group("s0", ours)}},
		{name: "the cutter ran no hooks itself: own hooks", mapper: served, objs: []client.Object{
			cutter(func(s *snapv1.Snapshot) { s.Status.Hooks.GroupMember = "s9" }), group("s0", ours, "uid-s0")}},
		{name: "the cutter is another policy's: own hooks", mapper: served, objs: []client.Object{
			cutter(func(s *snapv1.Snapshot) { s.Spec.PolicyRef.Name = "other" }), group("s0", ours, "uid-s0")}},
		{name: "a group someone else made: refused before the hooks", mapper: served, objs: []client.Object{group("s0", map[string]string{"app": "x"})}, refused: "was not cut by snapflow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(groupFixture(ns)...).WithObjects(tc.objs...)
			if tc.mapper != nil {
				b = b.WithRESTMapper(tc.mapper)
			}
			f := &Function{Client: b.Build(), Namespace: "snapflow-system"}
			var s snapv1.Snapshot
			if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s1"}, &s); err != nil {
				t.Fatal(err)
			}
			pol := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}}
			cutBy, refused, err := f.groupCut(ctx, &s, &runPlan{policy: pol}, s.Spec.Source.Group)
			if err != nil {
				t.Fatal(err)
			}
			if cutBy != tc.cutBy || (refused == nil) != (tc.refused == "") || (refused != nil && !strings.Contains(refused.message, tc.refused)) {
				t.Fatalf("cutBy %q refused %+v; want %q, refusal naming %q", cutBy, refused, tc.cutBy, tc.refused)
			}
		})
	}
}

func ptrTime(t time.Time) *metav1.Time {
	m := metav1.NewTime(t)
	return &m
}
