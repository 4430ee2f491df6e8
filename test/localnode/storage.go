package localnode

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

func (n *Node) snapshotDir(ns, name string) string {
	return filepath.Join(n.o.Root, "snapshots", ns, name)
}

// syncStorage plays the CSI driver: it cuts VolumeSnapshots, provisions
// PVCs (empty, from a snapshot, or cloned) and frees deleted volumes.
func (n *Node) syncStorage(ctx context.Context) {
	snaps := list(volumeSnapshotGVK)
	if err := n.o.Client.List(ctx, snaps); err == nil {
		for i := range snaps.Items {
			if err := n.cutSnapshot(ctx, &snaps.Items[i]); err != nil && ctx.Err() == nil {
				n.o.Log.Error(err, "volume snapshot", "name", snaps.Items[i].GetNamespace()+"/"+snaps.Items[i].GetName())
			}
		}
		n.freeDeleted(filepath.Join(n.o.Root, "snapshots"), func(ns, name string) bool {
			for _, s := range snaps.Items {
				if s.GetNamespace() == ns && s.GetName() == name {
					return true
				}
			}
			return false
		})
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := n.o.Client.List(ctx, &pvcs); err != nil {
		return
	}
	for i := range pvcs.Items {
		if err := n.provision(ctx, &pvcs.Items[i]); err != nil && ctx.Err() == nil {
			n.o.Log.Error(err, "provision", "pvc", pvcs.Items[i].Namespace+"/"+pvcs.Items[i].Name)
		}
	}
	n.freePVs(ctx, pvcs.Items)
	// A volume's data lives as long as its claim or its PV: a PV handed to
	// another claim (a populator's rebind) keeps the directory it was
	// provisioned with.
	var pvs corev1.PersistentVolumeList
	if err := n.o.Client.List(ctx, &pvs); err != nil {
		return
	}
	n.freeDeleted(filepath.Join(n.o.Root, "pvc"), func(ns, name string) bool {
		for _, p := range pvcs.Items {
			if p.Namespace == ns && p.Name == name {
				return true
			}
		}
		for _, pv := range pvs.Items {
			if pv.Spec.CSI != nil && pv.Spec.CSI.Driver == Driver && pv.Spec.CSI.VolumeHandle == ns+"/"+name {
				return true
			}
		}
		// The lists above may predate a PVC created since (and already
		// written to by a test): ask again before removing anything.
		var live corev1.PersistentVolumeClaim
		return n.o.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &live) == nil
	})
}

func (n *Node) cutSnapshot(ctx context.Context, s *unstructured.Unstructured) error {
	if ready, _, _ := unstructured.NestedBool(s.Object, "status", "readyToUse"); ready || s.GetDeletionTimestamp() != nil {
		return nil
	}
	pvc, _, _ := unstructured.NestedString(s.Object, "spec", "source", "persistentVolumeClaimName")
	if pvc == "" {
		return nil // pre-provisioned content is not supported here
	}
	src := n.PVCDir(s.GetNamespace(), pvc)
	if _, err := os.Stat(src); err != nil {
		return nil // the PVC has no data yet; a real driver would wait too
	}
	dst := n.snapshotDir(s.GetNamespace(), s.GetName())
	_ = os.RemoveAll(dst)
	size, err := copyTree(src, dst)
	if err != nil {
		return err
	}
	status := map[string]any{
		"readyToUse":                     true,
		"creationTime":                   metav1.Now().UTC().Format("2006-01-02T15:04:05Z"),
		"restoreSize":                    resource.NewQuantity(max(size, 1<<20), resource.BinarySI).String(),
		"boundVolumeSnapshotContentName": "snapcontent-" + string(s.GetUID()),
	}
	if err := unstructured.SetNestedField(s.Object, status, "status"); err != nil {
		return err
	}
	return n.o.Client.Status().Update(ctx, s)
}

// pvcProtection is the finalizer the API server puts on every PVC; the
// controller manager removes it once no pod uses the claim.
const pvcProtection = "kubernetes.io/pvc-protection"

func (n *Node) provision(ctx context.Context, p *corev1.PersistentVolumeClaim) error {
	if p.DeletionTimestamp != nil {
		if !controllerutil.ContainsFinalizer(p, pvcProtection) || n.inUse(p.Namespace, p.Name) {
			return nil
		}
		controllerutil.RemoveFinalizer(p, pvcProtection)
		return client.IgnoreNotFound(n.o.Client.Update(ctx, p))
	}
	if p.Status.Phase == corev1.ClaimBound {
		return nil
	}
	dst := n.PVCDir(p.Namespace, p.Name)
	ds := p.Spec.DataSourceRef
	if ds == nil && p.Spec.DataSource != nil {
		ds = &corev1.TypedObjectReference{APIGroup: p.Spec.DataSource.APIGroup, Kind: p.Spec.DataSource.Kind, Name: p.Spec.DataSource.Name}
	}
	switch {
	case ds == nil:
		if err := ensureDir(dst); err != nil {
			return err
		}
	case ds.Kind == "VolumeSnapshot":
		src := n.snapshotDir(p.Namespace, ds.Name)
		if _, err := os.Stat(src); err != nil {
			return nil // wait until the snapshot is cut
		}
		if _, err := copyTree(src, dst); err != nil {
			return err
		}
	case ds.Kind == "PersistentVolumeClaim":
		if _, err := os.Stat(n.PVCDir(p.Namespace, ds.Name)); err != nil {
			return nil // wait until the source has data, as a driver would
		}
		if _, err := copyTree(n.PVCDir(p.Namespace, ds.Name), dst); err != nil {
			return err
		}
	default:
		// A volume populator's job, not the driver's. Once the populator
		// hands over a PV claimed for this PVC, bind as the PV controller would.
		return n.bindHandedOver(ctx, p)
	}
	// Bind as a dynamic provisioner would: a PV for the claim, so volume
	// policies see the storage class, capacity and CSI driver on the PV.
	q, ok := p.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		q = resource.MustParse("1Gi")
	}
	pvName := "pvc-" + string(p.UID)
	if p.Spec.VolumeName == "" {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: pvName, Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": Driver}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: q},
				AccessModes:                   p.Spec.AccessModes,
				ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: p.Namespace, Name: p.Name, UID: p.UID, APIVersion: "v1"},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				VolumeMode:                    p.Spec.VolumeMode,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: Driver, VolumeHandle: p.Namespace + "/" + p.Name}},
			},
		}
		if p.Spec.StorageClassName != nil {
			pv.Spec.StorageClassName = *p.Spec.StorageClassName
		}
		if err := n.o.Client.Create(ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create PV for %s/%s: %w", p.Namespace, p.Name, err)
		}
		p.Spec.VolumeName = pvName
		if err := n.o.Client.Update(ctx, p); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	p.Status.Phase = corev1.ClaimBound
	p.Status.AccessModes = p.Spec.AccessModes
	p.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: q}
	if err := n.o.Client.Status().Update(ctx, p); err != nil && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// bindHandedOver binds p to a PV whose claimRef names p's UID.
func (n *Node) bindHandedOver(ctx context.Context, p *corev1.PersistentVolumeClaim) error {
	var pvs corev1.PersistentVolumeList
	if err := n.o.Client.List(ctx, &pvs); err != nil {
		return err
	}
	for _, pv := range pvs.Items {
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != p.UID {
			continue
		}
		p.Spec.VolumeName = pv.Name
		if err := n.o.Client.Update(ctx, p); err != nil {
			return client.IgnoreNotFound(err)
		}
		p.Status.Phase, p.Status.AccessModes, p.Status.Capacity = corev1.ClaimBound, pv.Spec.AccessModes, pv.Spec.Capacity
		if err := n.o.Client.Status().Update(ctx, p); err != nil && !apierrors.IsConflict(err) {
			return err
		}
		return nil
	}
	return nil
}

// VolumeDir is the directory holding a bound PVC's data: its PV's, which
// is where the PVC was provisioned unless a populator handed the PV over.
func (n *Node) VolumeDir(ctx context.Context, namespace, name string) (string, error) {
	var p corev1.PersistentVolumeClaim
	if err := n.o.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &p); err != nil {
		return "", err
	}
	if p.Spec.VolumeName != "" {
		var pv corev1.PersistentVolume
		if err := n.o.Client.Get(ctx, client.ObjectKey{Name: p.Spec.VolumeName}, &pv); err == nil && pv.Spec.CSI != nil && pv.Spec.CSI.Driver == Driver {
			if ns, nm, ok := strings.Cut(pv.Spec.CSI.VolumeHandle, "/"); ok {
				return n.PVCDir(ns, nm), nil
			}
		}
	}
	return n.PVCDir(namespace, name), nil
}

// Driver is the CSI driver name the local node's volumes carry.
const Driver = "localnode.snapflow.dev"

// freePVs deletes the PVs of claims that are gone (reclaim policy Delete).
func (n *Node) freePVs(ctx context.Context, pvcs []corev1.PersistentVolumeClaim) {
	var pvs corev1.PersistentVolumeList
	if err := n.o.Client.List(ctx, &pvs); err != nil {
		return
	}
	live := map[string]bool{}
	for _, p := range pvcs {
		live[string(p.UID)] = true
	}
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		if pv.Annotations["pv.kubernetes.io/provisioned-by"] != Driver || pv.Spec.ClaimRef == nil || live[string(pv.Spec.ClaimRef.UID)] {
			continue
		}
		if pv.DeletionTimestamp == nil {
			_ = n.o.Client.Delete(ctx, pv)
		} else if controllerutil.RemoveFinalizer(pv, "kubernetes.io/pv-protection") {
			_ = n.o.Client.Update(ctx, pv)
		}
	}
}

// freeDeleted removes <base>/<ns>/<name> directories whose object is gone.
func (n *Node) freeDeleted(base string, exists func(ns, name string) bool) {
	nss, _ := os.ReadDir(base)
	for _, ns := range nss {
		items, _ := os.ReadDir(filepath.Join(base, ns.Name()))
		for _, it := range items {
			if !exists(ns.Name(), it.Name()) {
				_ = os.RemoveAll(filepath.Join(base, ns.Name(), it.Name()))
			}
		}
	}
}

// copyTree copies src into dst preserving owners, modes and times, as a
// volume snapshot does; it returns the bytes copied.
func copyTree(src, dst string) (int64, error) {
	var total int64
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case info.IsDir():
			if err := os.MkdirAll(target, info.Mode().Perm()|0o700); err != nil {
				return err
			}
			return keepOwner(target, info)
		case info.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(l, target); err != nil {
				return err
			}
			return keepOwner(target, info)
		case info.Mode().IsRegular():
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
			if err != nil {
				return err
			}
			n, err := io.Copy(out, in)
			total += n
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if err := keepOwner(target, info); err != nil {
				return err
			}
			return os.Chtimes(target, info.ModTime(), info.ModTime())
		}
		return nil
	})
	if err != nil {
		return total, fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return total, nil
}

// keepOwner gives target the owner and exact mode of the file info
// describes (past the umask). Only root may give files away; another user's
// copies stay its own, as before.
func keepOwner(target string, info os.FileInfo) error {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || os.Geteuid() != 0 {
		return nil
	}
	if err := os.Lchown(target, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if info.Mode()&os.ModeSymlink != 0 {
		return nil
	}
	return os.Chmod(target, info.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky))
}
