// Package projection copies a repository's credentials into the namespace of
// a mover Job that runs away from them: a ClusterRepository's Secrets live in
// snapflow's namespace, while a backup's mover runs next to its PVC. The
// copies exist for one run: they carry the run's owner reference and are
// reaped when the run ends.
package projection

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/jobwatch"
)

// ErrDisabled means a run needs a projection its owner has not enabled.
var ErrDisabled = errors.New("credential projection is not enabled")

// ErrSource means a Secret, ConfigMap or key to copy does not exist; the
// run cannot start without it.
var ErrSource = errors.New("a repository credential source is missing")

// SecretName and ConfigMapName are the projected copies for Job job.
func SecretName(job string) string    { return job + "-creds" }
func ConfigMapName(job string) string { return job + "-ca" }

// Homes says in which namespace each Secret and ConfigMap a mover Job reads
// lives; a name not listed lives in Default. A ClusterRepository names the
// namespace of each reference, a Repository's live beside it.
type Homes struct {
	Default    string
	Secrets    map[string]string
	ConfigMaps map[string]string
	// Ambiguous lists references whose name the repository uses in two
	// namespaces: a Job reads by name, so their copies would collide.
	Ambiguous []string
}

func (h Homes) secret(name string) string    { return pick(h.Secrets, name, h.Default) }
func (h Homes) configMap(name string) string { return pick(h.ConfigMaps, name, h.Default) }

func pick(m map[string]string, name, def string) string {
	if ns := m[name]; ns != "" {
		return ns
	}
	return def
}

// Elsewhere lists the namespaces other than ns that hold a source.
func (h Homes) Elsewhere(ns string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(home string) {
		if home != "" && home != ns && !seen[home] {
			seen[home] = true
			out = append(out, home)
		}
	}
	if len(h.Secrets)+len(h.ConfigMaps) == 0 {
		add(h.Default) // nothing named: everything lives in Default
	}
	for _, v := range h.Secrets {
		add(v)
	}
	for _, v := range h.ConfigMaps {
		add(v)
	}
	sort.Strings(out)
	return out
}

// Needed says whether a mover Job in ns must read copies: a pod can only
// read Secrets and ConfigMaps of its own namespace.
func (h Homes) Needed(ns string) bool { return len(h.Elsewhere(ns)) > 0 }

// Sources are the Secrets and ConfigMaps a Job reads, by name, as found in
// the repository's home namespace.
type Sources struct {
	Secrets    map[string]*corev1.Secret
	ConfigMaps map[string]*corev1.ConfigMap
}

// Refs lists the Secret and ConfigMap names job reads for credentials. The
// Job's own work-spec ConfigMap (named like the Job) is not a credential.
func Refs(job *batchv1.Job) (secrets, configMaps []string) {
	seen := map[string]bool{}
	add := func(list *[]string, kind, name string) {
		if name != "" && !seen[kind+"/"+name] {
			seen[kind+"/"+name] = true
			*list = append(*list, name)
		}
	}
	spec := &job.Spec.Template.Spec
	for _, c := range spec.Containers {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				add(&secrets, "Secret", e.ValueFrom.SecretKeyRef.Name)
			}
		}
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				add(&secrets, "Secret", e.SecretRef.Name)
			}
		}
	}
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name != job.Name {
			add(&configMaps, "ConfigMap", v.ConfigMap.Name)
		}
	}
	sort.Strings(secrets)
	sort.Strings(configMaps)
	return secrets, configMaps
}

// Build renders the copies job needs from src and rewrites job to read
// them. Only what the Job reads is copied: one key of a secretKeyRef, every
// key of an envFrom Secret, the listed items of a ConfigMap volume.
func Build(job *batchv1.Job, src Sources) (*corev1.Secret, *corev1.ConfigMap, error) {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: job.Namespace, OwnerReferences: job.OwnerReferences,
			Labels: map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue, wellknown.LabelProjectedFor: job.Name}}
	}
	sec := &corev1.Secret{ObjectMeta: meta(SecretName(job.Name)), Type: corev1.SecretTypeOpaque, Data: map[string][]byte{}}
	cm := &corev1.ConfigMap{ObjectMeta: meta(ConfigMapName(job.Name)), Data: map[string]string{}}
	secret := func(name string) (*corev1.Secret, error) {
		if s := src.Secrets[name]; s != nil {
			return s, nil
		}
		return nil, fmt.Errorf("%w: Secret %s was not read", ErrSource, name)
	}
	spec := &job.Spec.Template.Spec
	// envFrom first, so a single key asked for by name wins on a clash.
	for ci := range spec.Containers {
		c := &spec.Containers[ci]
		for i := range c.EnvFrom {
			ref := c.EnvFrom[i].SecretRef
			if ref == nil {
				continue
			}
			s, err := secret(ref.Name)
			if err != nil {
				return nil, nil, err
			}
			for k, v := range s.Data {
				sec.Data[k] = v
			}
			ref.Name = sec.Name
		}
	}
	for ci := range spec.Containers {
		c := &spec.Containers[ci]
		for i := range c.Env {
			vf := c.Env[i].ValueFrom
			if vf == nil || vf.SecretKeyRef == nil {
				continue
			}
			ref := vf.SecretKeyRef
			s, err := secret(ref.Name)
			if err != nil {
				return nil, nil, err
			}
			v, ok := s.Data[ref.Key]
			switch {
			case ok:
				// Stored under the variable's name: two Secrets may use one key name.
				sec.Data[c.Env[i].Name] = v
			case ref.Optional == nil || !*ref.Optional:
				return nil, nil, fmt.Errorf("%w: Secret %s/%s has no key %q", ErrSource, s.Namespace, s.Name, ref.Key)
			}
			// An optional key the source lacks stays absent in the copy too.
			ref.Name, ref.Key = sec.Name, c.Env[i].Name
		}
	}
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		if v.ConfigMap == nil || v.ConfigMap.Name == job.Name {
			continue
		}
		src := src.ConfigMaps[v.ConfigMap.Name]
		if src == nil {
			return nil, nil, fmt.Errorf("%w: ConfigMap %s was not read", ErrSource, v.ConfigMap.Name)
		}
		for j := range v.ConfigMap.Items {
			it := &v.ConfigMap.Items[j]
			val, ok := src.Data[it.Key]
			if !ok {
				return nil, nil, fmt.Errorf("%w: ConfigMap %s/%s has no key %q", ErrSource, src.Namespace, src.Name, it.Key)
			}
			key := v.Name + "." + it.Key
			cm.Data[key] = val
			it.Key = key
		}
		v.ConfigMap.Name = cm.Name
	}
	if len(cm.Data) == 0 {
		cm = nil
	}
	return sec, cm, nil
}

// Apply makes the copies job needs when it runs outside home, and rewrites
// job to use them; call it before creating job. It is idempotent: a
// redelivered event rewrites the same copies. enabled is the run owner's
// consent (spec.credentialProjection.enabled) and fix tells how to give it.
func Apply(ctx context.Context, c client.Client, job *batchv1.Job, homes Homes, enabled bool, fix string) error {
	secrets, cms := Refs(job)
	// Only what the Job reads decides; a Job that reads nothing from another
	// namespace needs no copies.
	read := Homes{Secrets: map[string]string{}, ConfigMaps: map[string]string{}}
	for _, n := range secrets {
		read.Secrets[n] = homes.secret(n)
	}
	for _, n := range cms {
		read.ConfigMaps[n] = homes.configMap(n)
	}
	away := read.Elsewhere(job.Namespace)
	if len(away) == 0 {
		return nil
	}
	if len(homes.Ambiguous) > 0 {
		return fmt.Errorf("%w: the repository names %s in two namespaces; give them different names so a mover can read both", ErrSource, strings.Join(homes.Ambiguous, ", "))
	}
	if !enabled {
		return fmt.Errorf("%w: the repository's credentials live in namespace %s, which a mover in namespace %s cannot read; %s to copy them into %s for each run (the copies are deleted when the run ends)",
			ErrDisabled, strings.Join(away, ", "), job.Namespace, fix, job.Namespace)
	}
	src := Sources{Secrets: map[string]*corev1.Secret{}, ConfigMaps: map[string]*corev1.ConfigMap{}}
	for _, n := range secrets {
		s := &corev1.Secret{}
		if err := get(ctx, c, read.Secrets[n], n, s, "Secret"); err != nil {
			return err
		}
		src.Secrets[n] = s
	}
	for _, n := range cms {
		m := &corev1.ConfigMap{}
		if err := get(ctx, c, read.ConfigMaps[n], n, m, "ConfigMap"); err != nil {
			return err
		}
		src.ConfigMaps[n] = m
	}
	sec, cm, err := Build(job, src)
	if err != nil {
		return err
	}
	if err := upsert(ctx, c, sec, func(have *corev1.Secret) { have.Data = sec.Data }); apierrors.IsForbidden(err) {
		return forbidden(err)
	} else if err != nil {
		return fmt.Errorf("project the repository credentials into %s: %w", job.Namespace, err)
	}
	if cm != nil {
		if err := upsert(ctx, c, cm, func(have *corev1.ConfigMap) { have.Data = cm.Data }); apierrors.IsForbidden(err) {
			return forbidden(err)
		} else if err != nil {
			return fmt.Errorf("project the repository CA bundle into %s: %w", job.Namespace, err)
		}
	}
	return nil
}

// Reap deletes the copies made for Job job in ns; none is success. Only
// objects labelled as copies for that Job are deleted. A function without
// Secret access in ns (projection not granted, or granted elsewhere, as
// cleanup's is) cannot have made any: Forbidden is nothing to reap.
func Reap(ctx context.Context, c client.Client, ns, job string) error {
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: SecretName(job)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ConfigMapName(job)}},
	} {
		err := c.Get(ctx, client.ObjectKeyFromObject(o), o)
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read projected %s/%s: %w", ns, o.GetName(), err)
		}
		if o.GetLabels()[wellknown.LabelProjectedFor] != job {
			continue // not ours: a user's object of the same name
		}
		// Forbidden: the function may not write copies in ns, so this one
		// is not its (a tenant's object dressed as a copy).
		if err := c.Delete(ctx, o, client.Preconditions{UID: ptrUID(o)}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
			return fmt.Errorf("reap projected %s/%s: %w", ns, o.GetName(), err)
		}
	}
	return nil
}

func ptrUID(o client.Object) *types.UID { u := o.GetUID(); return &u }

// forbidden explains a projection the function's RBAC does not allow: the
// chart grants Secret access for copying only when asked to.
func forbidden(err error) error {
	return fmt.Errorf("%w: snapflow's function may not copy credentials (%v); install the chart with credentialProjection.enabled=true, which grants the functions Secret access for copying", ErrSource, err)
}

func get(ctx context.Context, c client.Client, ns, name string, o client.Object, kind string) error {
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %s %s/%s, named by the repository, does not exist", ErrSource, kind, ns, name)
	}
	if apierrors.IsForbidden(err) {
		return forbidden(err)
	}
	if err != nil {
		return fmt.Errorf("read %s %s/%s: %w", kind, ns, name, err)
	}
	return nil
}

func upsert[T client.Object](ctx context.Context, c client.Client, want T, update func(T)) error {
	err := c.Create(ctx, want)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	have := want.DeepCopyObject().(T)
	if err := c.Get(ctx, client.ObjectKeyFromObject(want), have); err != nil {
		return err
	}
	if have.GetLabels()[wellknown.LabelProjectedFor] != want.GetLabels()[wellknown.LabelProjectedFor] {
		return fmt.Errorf("%w: %s/%s exists and is not a copy snapflow made for this run; rename or remove it", ErrSource, have.GetNamespace(), have.GetName())
	}
	update(have)
	return c.Update(ctx, have)
}

// sweepGrace spares a copy whose Job does not exist yet: Apply writes the
// copies just before the Job is created.
const sweepGrace = 2 * time.Minute

// Sweep deletes the copies in ns whose Job is done, or gone for longer than
// a grace period. Runs that finish without a function seeing the end (a
// pin, a verification) are reaped by the next event for their namespace.
func Sweep(ctx context.Context, c client.Client, ns string, now time.Time) error {
	sel := client.HasLabels{wellknown.LabelProjectedFor}
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, client.InNamespace(ns), sel); apierrors.IsForbidden(err) {
		return nil // no Secret access, so no copies
	} else if err != nil {
		return fmt.Errorf("list projected credentials in %s: %w", ns, err)
	}
	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms, client.InNamespace(ns), sel); apierrors.IsForbidden(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("list projected CA bundles in %s: %w", ns, err)
	}
	// A Job's newest copy decides whether it is past the grace period.
	newest := map[string]time.Time{}
	note := func(o metav1.Object) {
		job, t := o.GetLabels()[wellknown.LabelProjectedFor], o.GetCreationTimestamp().Time
		if have, ok := newest[job]; !ok || t.After(have) {
			newest[job] = t
		}
	}
	for i := range secrets.Items {
		note(&secrets.Items[i])
	}
	for i := range cms.Items {
		note(&cms.Items[i])
	}
	for name, created := range newest {
		var j batchv1.Job
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &j)
		switch {
		case apierrors.IsNotFound(err):
			if created.IsZero() || now.Sub(created) < sweepGrace {
				continue
			}
		case err != nil:
			return err
		case !jobwatch.Done(&j):
			continue
		}
		if err := Reap(ctx, c, ns, name); err != nil {
			return err
		}
	}
	return nil
}
