package restore

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/internal/moverjob"
)

// The volume populator handshake: a user's PVC names a Restore in
// spec.dataSourceRef and stays Pending; the restore writes into a prime PVC
// of the same shape, then hands the prime's PV to the user's PVC (its
// claimRef) and deletes the prime, and the PV controller binds the two.

// populated is the user's PVC naming rs in its dataSourceRef.
func (f *Function) populated(ctx context.Context, rs *snapv1.Restore) (*corev1.PersistentVolumeClaim, string, string, error) {
	var list corev1.PersistentVolumeClaimList
	if err := f.Client.List(ctx, &list, client.InNamespace(rs.Namespace)); err != nil {
		return nil, "", "", err
	}
	var users []corev1.PersistentVolumeClaim
	for _, p := range list.Items {
		if namesRestore(&p, rs.Name) && p.DeletionTimestamp == nil {
			users = append(users, p)
		}
	}
	switch len(users) {
	case 0:
		return nil, ReasonTargetNotFound, fmt.Sprintf("no PVC in namespace %s names this Restore in spec.dataSourceRef (apiGroup: %s, kind: Restore, name: %s); create one and it will be populated", rs.Namespace, snapv1.GroupVersion.Group, rs.Name), nil
	case 1:
		return &users[0], "", "", nil
	}
	names := make([]string, 0, len(users))
	for _, u := range users {
		names = append(names, u.Name)
	}
	sort.Strings(names)
	return nil, ReasonTargetConflict, fmt.Sprintf("PVCs %s all name this Restore in spec.dataSourceRef; a Restore populates one PVC, so give each its own Restore", strings.Join(names, ", ")), nil
}

func namesRestore(p *corev1.PersistentVolumeClaim, name string) bool {
	ds := p.Spec.DataSourceRef
	return ds != nil && ds.APIGroup != nil && *ds.APIGroup == snapv1.GroupVersion.Group && ds.Kind == "Restore" && ds.Name == name
}

// primeName is the prime PVC of a user's PVC.
func primeName(user *corev1.PersistentVolumeClaim) string {
	return moverjob.Name("prime-"+user.Name, string(user.UID))
}

// ensurePrime creates the prime PVC the mover writes into: the user's PVC's
// shape without its dataSourceRef, owned by the Restore so a failed or
// deleted restore leaves nothing behind.
func (f *Function) ensurePrime(ctx context.Context, rs *snapv1.Restore, user *corev1.PersistentVolumeClaim) (string, error) {
	name := primeName(user)
	prime := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: name,
			Labels:          map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue, wellknown.LabelRestore: rs.Name, wellknown.LabelRestoreUID: string(rs.UID)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: snapv1.GroupVersion.String(), Kind: "Restore", Name: rs.Name, UID: rs.UID, Controller: ptr(true)}}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: user.Spec.AccessModes, Resources: user.Spec.Resources,
			StorageClassName: user.Spec.StorageClassName, VolumeMode: user.Spec.VolumeMode,
		},
	}
	if err := f.Client.Create(ctx, prime); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create the prime PVC %s: %w", name, err)
	}
	return name, nil
}

// handOver gives the prime's PV to the user's PVC and deletes the prime; it
// reports done once the user's PVC is bound to that PV. Every step is
// idempotent, so a retry after a crash picks up where it stopped.
func (f *Function) handOver(ctx context.Context, rs *snapv1.Restore) (bool, error) {
	t := rs.Status.Target
	if t == nil || t.PVCRef == "" || t.PVCPrime == "" {
		return true, nil
	}
	var user corev1.PersistentVolumeClaim
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: rs.Namespace, Name: t.PVCRef}, &user); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil // the user deleted it; nothing to hand over to
		}
		return false, err
	}
	// Status names the PVCs, and a mover can write status: rewire a volume
	// only to a PVC that names this Restore as its data source, from the
	// prime this Restore made for it.
	if !namesRestore(&user, rs.Name) {
		return false, fmt.Errorf("PVC %s/%s does not name Restore %s in spec.dataSourceRef; its volume is not handed over", user.Namespace, user.Name, rs.Name)
	}
	var prime corev1.PersistentVolumeClaim
	primeErr := f.Client.Get(ctx, client.ObjectKey{Namespace: rs.Namespace, Name: primeName(&user)}, &prime)
	if primeErr != nil && !apierrors.IsNotFound(primeErr) {
		return false, primeErr
	}
	if primeErr == nil && !host.Owned(&prime, rs) {
		return false, fmt.Errorf("PVC %s/%s is not the prime PVC of Restore %s: %w", prime.Namespace, prime.Name, rs.Name, host.ErrNotOwned)
	}
	if primeErr == nil && prime.Spec.VolumeName != "" {
		var pv corev1.PersistentVolume
		if err := f.Client.Get(ctx, client.ObjectKey{Name: prime.Spec.VolumeName}, &pv); err != nil {
			return false, err
		}
		if c := pv.Spec.ClaimRef; c != nil && c.UID != prime.UID && c.UID != user.UID {
			return false, fmt.Errorf("PV %s is claimed by %s/%s, not by prime PVC %s; it is not handed over", pv.Name, c.Namespace, c.Name, prime.Name)
		}
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != user.UID {
			pv.Spec.ClaimRef = &corev1.ObjectReference{APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: user.Namespace, Name: user.Name, UID: user.UID}
			if err := f.Client.Update(ctx, &pv); err != nil {
				return false, fmt.Errorf("hand PV %s to PVC %s: %w", pv.Name, user.Name, err)
			}
		}
	}
	if primeErr == nil {
		if prime.Spec.VolumeName == "" {
			return false, nil // not bound yet: nothing to hand over
		}
		if _, err := host.DeleteOwned(ctx, f.Client, &prime, rs); err != nil {
			return false, err
		}
	}
	return user.Status.Phase == corev1.ClaimBound, nil
}
