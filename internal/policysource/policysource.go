// Package policysource reads the volume policies that apply to a Snapshot:
// its recipe's resourcePolicy ConfigMap and the global baseline ConfigMap.
// Both are read afresh every time, because either may change or vanish
// after the process started.
package policysource

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/volumepolicy"
)

// Resolver reads policy ConfigMaps. GlobalName empty means no global baseline.
type Resolver struct {
	Reader     client.Reader
	Namespace  string // where the global ConfigMap lives (the install namespace)
	GlobalName string
}

func (r *Resolver) read(ctx context.Context, ns, name, what string) (*volumepolicy.Document, *volumepolicy.SourceRef, error) {
	return Read(ctx, r.Reader, ns, name, what)
}

// Read reads one volume-policy ConfigMap and validates it; what names the
// document in errors ("global backup volume policies", "resourcePolicy").
// Errors from the API server stay wrapped, so a caller can tell a
// Forbidden read apart.
func Read(ctx context.Context, c client.Reader, ns, name, what string) (*volumepolicy.Document, *volumepolicy.SourceRef, error) {
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("%s ConfigMap %s/%s does not exist; create it or fix the reference", what, ns, name)
		}
		return nil, nil, fmt.Errorf("read %s ConfigMap %s/%s: %w", what, ns, name, err)
	}
	doc, err := volumepolicy.FromConfigMap(&cm)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	if _, err := doc.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%s ConfigMap %s/%s is invalid: %w", what, ns, name, err)
	}
	return doc, &volumepolicy.SourceRef{ConfigMap: ns + "/" + name, ResourceVersion: cm.ResourceVersion}, nil
}

// Global reads and validates the global baseline. Only its volumePolicies
// apply; ignored names the other sections it carries, for a log warning.
func (r *Resolver) Global(ctx context.Context) (doc *volumepolicy.Document, ref *volumepolicy.SourceRef, ignored []string, err error) {
	if r.GlobalName == "" {
		return nil, nil, nil, nil
	}
	doc, ref, err = r.read(ctx, r.Namespace, r.GlobalName, "global backup volume policies")
	if err != nil {
		return nil, nil, nil, err
	}
	ignored = doc.OtherSections()
	return &volumepolicy.Document{Version: doc.Version, VolumePolicies: doc.VolumePolicies}, ref, ignored, nil
}

// Resolve builds the stamp for a Snapshot of policy: nil when neither the
// recipe nor a global baseline has volume policies.
func (r *Resolver) Resolve(ctx context.Context, policy *snapv1.SnapshotPolicy) (*volumepolicy.Stamp, error) {
	var recipe *volumepolicy.Document
	stamp := &volumepolicy.Stamp{}
	if policy != nil && policy.Spec.ResourcePolicy != nil {
		doc, ref, err := r.read(ctx, policy.Namespace, policy.Spec.ResourcePolicy.Name, "SnapshotPolicy "+policy.Name+" resourcePolicy")
		if err != nil {
			return nil, err
		}
		recipe, stamp.Recipe = doc, ref
	}
	global, ref, ignored, err := r.Global(ctx)
	if err != nil {
		return nil, err
	}
	stamp.Global, stamp.Ignored = ref, ignored
	if stamp.Recipe == nil && stamp.Global == nil {
		return nil, nil
	}
	stamp.Rules = volumepolicy.Merge(recipe, global)
	if stamp.Rules == nil {
		stamp.Rules = []volumepolicy.Rule{}
	}
	return stamp, nil
}
