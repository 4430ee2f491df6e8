package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/test/harness"
)

var vgsGVK = schema.GroupVersionKind{Group: "groupsnapshot.storage.k8s.io", Version: "v1", Kind: "VolumeGroupSnapshot"}

// A selector matching three PVCs, with the default groupBy, is cut as one
// VolumeGroupSnapshot: the hooks quiesce the workload once, in the member
// that cuts the group, and resume it as soon as the group is ready, before
// any upload. The members are backed up one after another (one mover
// slot), and the data changes while the thaw hook runs, yet every member
// holds the data of the instant the group was cut, and each restores to
// it. The group goes once the last member ran.
func TestSelectorPVCsAreBackedUpFromOneGroupSnapshot(t *testing.T) {
	const ns = "group-snapshot"
	ctx := testContext(t)
	backupNamespace(t, ns, 1, "  concurrency: {maxConcurrentJobs: 1}\n")
	members := []string{"pg-a", "pg-b", "pg-c"}
	state := func(pvc string) string { return filepath.Join(env.Functions.Node.PVCDir(ns, pvc), "state.txt") }
	for _, name := range members {
		kubectl(t, []byte(fmt.Sprintf(`
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: %s, namespace: %s, labels: {app: pg}}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`, name, ns)), 0, "apply", "-f", "-")
		if err := os.MkdirAll(filepath.Dir(state(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(state(name), []byte("txid 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The freeze answers at once; the thaw holds until the workload has
	// moved on, which it does while no upload has started.
	release, thawing := make(chan struct{}), make(chan struct{}, 1)
	var freezes, thaws atomic.Int32
	var cutBeforeThaw atomic.Bool
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/freeze":
			freezes.Add(1)
		case "/thaw":
			// The workload is resumed only once the group's instant is taken.
			groups := &unstructured.UnstructuredList{}
			groups.SetGroupVersionKind(vgsGVK.GroupVersion().WithKind("VolumeGroupSnapshotList"))
			if err := env.Client.List(context.Background(), groups, client.InNamespace(ns)); err == nil && len(groups.Items) == 1 {
				ready, _, _ := unstructured.NestedBool(groups.Items[0].Object, "status", "readyToUse")
				cutBeforeThaw.Store(ready)
			}
			if thaws.Add(1) == 1 {
				thawing <- struct{}{}
			}
			select {
			case <-release:
			case <-time.After(2 * time.Minute):
			}
		}
	}))
	defer hook.Close()
	kubectl(t, groupPolicy(ns, "pg", "{matchExpressions: [{key: app, operator: In, values: [pg]}]}", hook.URL), 0, "apply", "-f", "-")

	var wg sync.WaitGroup
	var stdout, stderr string
	var code int
	wg.Add(1)
	go func() {
		defer wg.Done()
		stdout, stderr, code = runSnapflow(t, "snapshot", "now", "--policy", "pg", "-n", ns)
	}()

	// Once the group is cut, the workload moves on: every later member
	// must still be backed up from the group, not from the live volume.
	var group string
	eventually(t, func() error {
		snaps := policySnapshots(t, ns, "pg")
		if len(snaps) != 3 {
			return fmt.Errorf("%d Snapshots minted", len(snaps))
		}
		for _, s := range snaps {
			g := s.Spec.Source.Group
			if g == nil || s.Labels[wellknown.LabelVolumeGroup] != g.VolumeGroupSnapshotName || (group != "" && g.VolumeGroupSnapshotName != group) {
				t.Fatalf("%s: spec.source.group %+v, labels %v: the three members must share one group", s.Name, g, s.Labels)
			}
			group = g.VolumeGroupSnapshotName
		}
		vgs := &unstructured.Unstructured{}
		vgs.SetGroupVersionKind(vgsGVK)
		if err := env.Client.Get(ctx, clientKey(ns, group), vgs); err != nil {
			return err
		}
		if ready, _, _ := unstructured.NestedBool(vgs.Object, "status", "readyToUse"); !ready {
			return fmt.Errorf("VolumeGroupSnapshot %s not ready yet", group)
		}
		if len(vgs.GetOwnerReferences()) == 0 {
			t.Fatalf("VolumeGroupSnapshot %s has no owner: nothing would ever delete it", group)
		}
		return nil
	})
	// The group covers exactly the firing's volumes: the snapshot
	// controller reads only matchLabels, so snapflow marks them with the
	// group's own key, and the policy's matchExpressions never reach it.
	memberLabels := func() map[string]string {
		out := map[string]string{}
		for _, name := range append([]string{"app-data", "kopia-repo"}, members...) {
			var pvc corev1.PersistentVolumeClaim
			if err := env.Client.Get(ctx, clientKey(ns, name), &pvc); err != nil {
				t.Fatal(err)
			}
			out[name] = pvc.Labels[wellknown.MemberPrefix+group]
		}
		return out
	}
	for name, v := range memberLabels() {
		if want := map[bool]string{true: wellknown.MemberValue}[slices.Contains(members, name)]; v != want {
			t.Errorf("PVC %s has member label %q, want %q", name, v, want)
		}
	}
	// The member that cut the group thaws the workload before its upload.
	select {
	case <-thawing:
	case <-time.After(harness.Timeout(3 * time.Minute)):
		t.Fatal("the workload was never thawed after the group was cut")
	}
	vgs := &unstructured.Unstructured{}
	vgs.SetGroupVersionKind(vgsGVK)
	if err := env.Client.Get(ctx, clientKey(ns, group), vgs); err != nil {
		t.Fatal(err)
	}
	if class, _, _ := unstructured.NestedString(vgs.Object, "spec", "volumeGroupSnapshotClassName"); class != "csi-group" {
		t.Errorf("the group is cut with class %q, want the policy's csi-group", class)
	}
	cutter := vgs.GetAnnotations()[wellknown.AnnotationCutBy]
	var cut snapv1.Snapshot
	if err := env.Client.Get(ctx, clientKey(ns, cutter), &cut); err != nil {
		t.Fatalf("the group names %q as its cutter: %v", cutter, err)
	}
	if cut.Status.Job != nil {
		t.Errorf("the thaw of %s ran after its mover Job %s was made; it should run before the upload", cutter, cut.Status.Job.Name)
	}
	for _, name := range members {
		if err := os.WriteFile(state(name), []byte("txid 2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	wg.Wait()
	if freezes.Load() != 1 || thaws.Load() != 1 {
		t.Fatalf("%d freezes and %d thaws, want one each for the group", freezes.Load(), thaws.Load())
	}
	if !cutBeforeThaw.Load() {
		t.Error("the workload was resumed before the group was ready")
	}
	if code != 0 || !strings.Contains(stderr, "3/3 finished") {
		t.Fatalf("snapshot now exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	snaps := policySnapshots(t, ns, "pg")
	for _, s := range snaps {
		done := waitSnapshot(t, ns, s.Name, snapv1.SnapshotSucceeded)
		if st := done.Status.Staged; st == nil || st.VolumeGroupSnapshotName != group || st.VolumeSnapshotName == "" || st.VolumeSnapshotName == s.Name+"-src" {
			t.Errorf("%s: status.staged %+v, want the member of group %s", s.Name, done.Status.Staged, group)
		}
		h := done.Status.Hooks
		switch {
		case h == nil || h.PostCompletedAt == nil:
			t.Errorf("%s: status.hooks %+v, want the hooks settled", s.Name, h)
		// Status times are whole seconds: a quick thaw reads 0s, so the
		// duration is checked against the stamps it is made from.
		case s.Name == cutter && (len(h.Results) != 2 || h.GroupMember != "" || h.PreCompletedAt == nil || h.QuiescedFor == nil ||
			h.QuiescedFor.Duration != h.Results[1].At.Sub(h.PreCompletedAt.Time)):
			t.Errorf("%s cut the group: status.hooks %+v, want both hooks' results and how long the workload was quiesced", s.Name, h)
		case s.Name != cutter && (h.GroupMember != cutter || len(h.Results) != 0 || h.QuiescedFor != nil):
			t.Errorf("%s: status.hooks %+v, want no hooks of its own and groupMember %s", s.Name, h, cutter)
		}
	}
	// The last member to finish deletes the group; its members go with it.
	eventually(t, func() error {
		vgs := &unstructured.Unstructured{}
		vgs.SetGroupVersionKind(vgsGVK)
		if err := env.Client.Get(ctx, clientKey(ns, group), vgs); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VolumeGroupSnapshot %s still there (%v) after every member finished", group, err)
		}
		return nil
	})

	for name, v := range memberLabels() {
		if v != "" {
			t.Errorf("PVC %s still carries the released group's label", name)
		}
	}

	// Each member restores to the instant of the group.
	for i, s := range snaps {
		name := fmt.Sprintf("back-%d", i)
		target := "restored-" + s.Spec.Source.Target.PVC.Name
		kubectl(t, restoreOf(ns, name, "{snapshotRef: {name: "+s.Name+"}}", "{pvc: {name: "+target+", capacity: 1Gi}}"), 0, "apply", "-f", "-")
		waitRestore(t, ns, name, snapv1.RestoreCompleted)
		got, err := os.ReadFile(state(target))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != "txid 1\n" {
			t.Errorf("%s restored %q from %s, want the group's instant %q", target, got, s.Name, "txid 1\n")
		}
	}
}

// groupPolicy is a policy that backs up the PVCs selector matches from one
// VolumeGroupSnapshot (groupBy left at its default; a recipe rule asks for
// CSI snapshots, as the suite's global baseline reads live volumes), with
// hooks calling hookURL's /freeze and /thaw.
func groupPolicy(ns, name, selector, hookURL string) []byte {
	return []byte(fmt.Sprintf(`
apiVersion: v1
kind: ConfigMap
metadata: {name: recipe, namespace: %[1]s}
data:
  policies.yaml: |
    version: v1
    volumePolicies:
      - conditions: {}
        action: {type: snapshot}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: %[2]s, namespace: %[1]s, annotations: {snapflow.dev/volume-group-snapshot-class: csi-group}}
spec:
  repository: {name: primary}
  resourcePolicy: {kind: configmap, name: recipe}
  sources: [{pvcSelector: {labelSelector: %[3]s}}]
  hooks:
    beforeSnapshot:
      - httpRequest: {url: "%[4]s/freeze"}
    afterSnapshot:
      - httpRequest: {url: "%[4]s/thaw"}
`, ns, name, selector, hookURL))
}
