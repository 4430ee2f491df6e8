package coverage

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/policysource"
	"github.com/snapflow/snapflow/internal/volumepolicy"
)

// ReadOptions tune Read for a process that acts on the verdicts.
type ReadOptions struct {
	// Strict makes an error of what the CLI only warns about (a namespace
	// or volume list that failed, a ConfigMap read that failed for a
	// passing reason): a process that alerts or announces must not do so
	// from a partial read, which would show excluded PVCs as unprotected.
	Strict bool
	// SkipRecipes leaves the policies' resourcePolicy ConfigMaps unread:
	// they decide how a covered PVC is backed up, never whether a PVC is
	// Unprotected, which is all the schedule function tells.
	SkipRecipes bool
	// List applies to every list (client.UnsafeDisableDeepCopy for a
	// cache whose objects are only read).
	List []client.ListOption
}

// Read lists what the verdicts need, in ns ("" for all), through c: the
// CLI's client, the exporter's watch cache or the schedule function's
// client. global names the global volume-policy ConfigMap as
// NAMESPACE/NAME ("" for none); it must be readable. A resourcePolicy
// ConfigMap that is missing or invalid makes its policy Failing, as every
// run of it fails; one the reader may not read is a warning (its PVCs are
// judged without its skip rules), as is, unless o.Strict, one whose read
// failed for another reason.
func Read(ctx context.Context, c client.Reader, ns, global string, o ReadOptions) (Input, []string, error) {
	var in Input
	var warnings []string
	soft := func(format string, args ...any) error {
		if o.Strict {
			return fmt.Errorf(format, args...)
		}
		warnings = append(warnings, fmt.Sprintf(format, args...))
		return nil
	}
	list := func(l client.ObjectList, opts ...client.ListOption) error {
		return c.List(ctx, l, append(append([]client.ListOption(nil), o.List...), opts...)...)
	}
	var pvcs corev1.PersistentVolumeClaimList
	var pols snapv1.SnapshotPolicyList
	var scheds snapv1.SnapshotScheduleList
	for _, l := range []client.ObjectList{&pvcs, &pols, &scheds} {
		if err := list(l, client.InNamespace(ns)); err != nil {
			return in, nil, fmt.Errorf("list %T: %w", l, err)
		}
	}
	in.PVCs, in.Policies, in.Schedules = pvcs.Items, pols.Items, scheds.Items
	// Namespace annotations: one namespace, or all of them.
	if ns != "" {
		var n corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: ns}, &n); err == nil {
			in.Namespaces = []corev1.Namespace{n}
		} else if !apierrors.IsNotFound(err) {
			if err := soft("namespace %s: %v (its %s annotation is not considered)", ns, err, wellknown.AnnotationBackupNotRequired); err != nil {
				return in, nil, err
			}
		}
	} else {
		var nl corev1.NamespaceList
		if err := list(&nl); err != nil {
			if err := soft("list namespaces: %v (their annotations are not considered)", err); err != nil {
				return in, nil, err
			}
		}
		in.Namespaces = nl.Items
	}
	// Volume policies look at the bound volume: one listing, not a read
	// per claim.
	in.PVs = map[string]*corev1.PersistentVolume{}
	var pvs corev1.PersistentVolumeList
	if err := list(&pvs); err != nil {
		if err := soft("list PersistentVolumes: %v (volume-policy rules on volumes are judged from the claims alone)", err); err != nil {
			return in, nil, err
		}
	}
	for i := range pvs.Items {
		in.PVs[pvs.Items[i].Name] = &pvs.Items[i]
	}
	in.Recipes, in.RecipeErrors = map[string]*volumepolicy.Document{}, map[string]string{}
	seen := map[string]bool{}
	for _, p := range pols.Items {
		if p.Spec.ResourcePolicy == nil || o.SkipRecipes {
			continue
		}
		key := p.Namespace + "/" + p.Spec.ResourcePolicy.Name
		if seen[key] {
			continue
		}
		seen[key] = true
		doc, _, err := policysource.Read(ctx, c, p.Namespace, p.Spec.ResourcePolicy.Name, "resourcePolicy")
		switch {
		case err == nil:
			in.Recipes[key] = doc
		case apierrors.IsForbidden(err):
			// Unknown, not broken: the reader may not read it.
			warnings = append(warnings, fmt.Sprintf("SnapshotPolicy %s/%s spec.resourcePolicy: %v (its skip rules are not considered)", p.Namespace, p.Name, err))
		case passing(err):
			if err := soft("SnapshotPolicy %s/%s spec.resourcePolicy: %v (its skip rules are not considered)", p.Namespace, p.Name, err); err != nil {
				return in, nil, err
			}
		default:
			// Missing or invalid: every run of the policy fails on it, as
			// the snapshot function reads it.
			in.RecipeErrors[key] = err.Error()
		}
	}
	if global != "" {
		gns, gname, ok := SplitConfigMap(global)
		if !ok {
			return in, nil, fmt.Errorf("global volume policies %q: want NAMESPACE/NAME of the ConfigMap", global)
		}
		doc, _, err := policysource.Read(ctx, c, gns, gname, "global backup volume policies")
		if err != nil {
			return in, nil, fmt.Errorf("global volume policies %s: %w", global, err)
		}
		in.Global, in.GlobalName = doc, global
	}
	return in, warnings, nil
}

// passing says whether a ConfigMap read failed for a reason that says
// nothing about the ConfigMap: the API server or the network, not a
// missing object (policysource reports that in words) or a bad document.
func passing(err error) bool {
	var status apierrors.APIStatus
	var netErr net.Error
	return errors.As(err, &status) || errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// SplitConfigMap splits a ConfigMap named as NAMESPACE/NAME.
func SplitConfigMap(s string) (ns, name string, ok bool) {
	ns, name, ok = strings.Cut(s, "/")
	return ns, name, ok && ns != "" && name != "" && !strings.Contains(name, "/")
}
