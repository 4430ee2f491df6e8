// Package coverage answers the question a backup owner most wants
// answered: is every volume that matters backed up? For each PVC it finds
// the SnapshotPolicies whose sources cover it, the schedules that fire
// them, and the volume-policy rule or annotation that excludes it, and
// gives one verdict. It is pure: the caller lists the objects.
package coverage

import (
	"fmt"
	"sort"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/fanout"
	"github.com/snapflow/snapflow/internal/volumepolicy"
)

// State is a PVC's verdict, best first.
type State string

const (
	// Protected: a policy covers it and an active schedule fires that policy.
	Protected State = "Protected"
	// Excluded: a volume-policy skip rule or an annotation says it needs no backup.
	Excluded State = "Excluded"
	// Failing: a policy that should back it up cannot (a missing
	// repository, two of its sources covering the PVC, an unreadable
	// resourcePolicy).
	Failing State = "Failing"
	// Unscheduled: a policy covers it, but no active schedule fires it.
	Unscheduled State = "Unscheduled"
	// Suspended: the only policies covering it are suspended.
	Suspended State = "Suspended"
	// Unprotected: nothing backs it up and nothing says it need not be.
	Unprotected State = "Unprotected"
)

var rank = map[State]int{Protected: 0, Excluded: 1, Failing: 2, Unscheduled: 3, Suspended: 4, Unprotected: 5}

// Input is what the verdicts are derived from.
type Input struct {
	PVCs []corev1.PersistentVolumeClaim
	// PVs by name, for the volume-policy conditions a bound PVC's volume decides.
	PVs        map[string]*corev1.PersistentVolume
	Policies   []snapv1.SnapshotPolicy
	Schedules  []snapv1.SnapshotSchedule
	Namespaces []corev1.Namespace
	// Global is the global volume-policy baseline and GlobalName its
	// ConfigMap (namespace/name); Recipes are the policies' resourcePolicy
	// documents by "namespace/configmap".
	Global     *volumepolicy.Document
	GlobalName string
	Recipes    map[string]*volumepolicy.Document
	// RecipeErrors are the resourcePolicy ConfigMaps, by "namespace/name",
	// that could not be read or are invalid: every run of their policies
	// fails.
	RecipeErrors map[string]string
}

// Verdict is one PVC's answer.
type Verdict struct {
	Namespace string `json:"namespace"`
	PVC       string `json:"pvc"`
	// UID tells a PVC from a later one of the same name.
	UID   types.UID `json:"uid,omitempty"`
	State State     `json:"state"`
	// Policies are the policies that back it up (Protected) or cover it.
	Policies    []string     `json:"policies,omitempty"`
	LastSuccess *metav1.Time `json:"lastSuccess,omitempty"`
	NextFiring  *metav1.Time `json:"nextFiring,omitempty"`
	Reason      string       `json:"reason"`
}

// Verdicts decides every PVC of in, sorted by namespace and name.
func Verdicts(in Input) []Verdict {
	nsAnn := map[string]string{}
	for _, n := range in.Namespaces {
		if v, ok := n.Annotations[wellknown.AnnotationBackupNotRequired]; ok {
			nsAnn[n.Name] = v
		}
	}
	// The policies covering each PVC.
	byPVC := map[string][]*snapv1.SnapshotPolicy{}
	// overlapped are the PVCs two sources of one policy cover, by
	// policy: every firing leaves them out.
	overlapped := map[string]bool{}
	metas := map[string][]metav1.ObjectMeta{}
	for _, c := range in.PVCs {
		metas[c.Namespace] = append(metas[c.Namespace], c.ObjectMeta)
	}
	for i := range in.Policies {
		p := &in.Policies[i]
		covered := map[string]bool{}
		for _, src := range p.Spec.Sources {
			if src.PVC != nil {
				covered[src.PVC.Name] = true
			}
		}
		if selected, err := fanout.Match(p, metas[p.Namespace]); err == nil {
			for _, names := range selected {
				for _, n := range names {
					covered[n] = true
				}
			}
			for _, o := range fanout.Overlaps(p, selected) {
				overlapped[p.Namespace+"/"+p.Name+"/"+o.PVC] = true
			}
		}
		for n := range covered {
			byPVC[p.Namespace+"/"+n] = append(byPVC[p.Namespace+"/"+n], p)
		}
	}
	var out []Verdict
	for i := range in.PVCs {
		c := &in.PVCs[i]
		if c.Labels[wellknown.LabelSnapshot] != "" || c.Labels["app.kubernetes.io/managed-by"] == "snapflow" || c.DeletionTimestamp != nil {
			continue // snapflow's own claims (staged, cache, prime), or going away
		}
		out = append(out, in.decide(c, byPVC[c.Namespace+"/"+c.Name], nsAnn, overlapped))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].PVC < out[j].PVC
	})
	return out
}

func (in Input) decide(c *corev1.PersistentVolumeClaim, policies []*snapv1.SnapshotPolicy, nsAnn map[string]string, overlapped map[string]bool) Verdict {
	v := Verdict{Namespace: c.Namespace, PVC: c.Name, UID: c.UID, State: Unprotected}
	vol := volumepolicy.Volume{PVC: c}
	if c.Spec.VolumeName != "" {
		vol.PV = in.PVs[c.Spec.VolumeName]
	}
	decided := false
	best := func(s State, reason string) {
		if !decided || rank[s] < rank[v.State] {
			v.State, v.Reason, decided = s, reason, true
		}
	}
	for _, p := range policies {
		name := p.Name
		if skip := in.skipRule(p, vol); skip != "" {
			best(Excluded, fmt.Sprintf("policy %s skips it: %s", name, skip))
			continue
		}
		if p.Spec.Suspend {
			best(Suspended, fmt.Sprintf("policy %s covers it but is suspended", name))
			continue
		}
		if why := in.failing(p, c, overlapped); why != "" {
			best(Failing, fmt.Sprintf("policy %s covers it but cannot back it up: %s", name, why))
			continue
		}
		next, active, named := in.firing(p)
		switch {
		case active:
			v.Policies = append(v.Policies, name)
			if t := p.Status.LastSuccessfulSnapshot; t != nil && (v.LastSuccess == nil || t.After(v.LastSuccess.Time)) {
				v.LastSuccess = t
			}
			if next != nil && (v.NextFiring == nil || next.Before(v.NextFiring)) {
				v.NextFiring = next
			}
			best(Protected, "")
		case named:
			best(Suspended, fmt.Sprintf("policy %s covers it but every schedule firing it is suspended", name))
		default:
			best(Unscheduled, fmt.Sprintf("policy %s covers it but no SnapshotSchedule fires it (only manual backups)", name))
		}
	}
	if v.State == Protected {
		v.Reason = "backed up by " + strings.Join(v.Policies, ", ")
		return v
	}
	// An explicit exclusion counts whatever covers the PVC; the global
	// baseline's skip rules only for a PVC no policy covers (a policy's
	// own rules already include them).
	if r, ok := c.Annotations[wellknown.AnnotationBackupNotRequired]; ok {
		best(Excluded, notRequired("the PVC", r))
	} else if r, ok := nsAnn[c.Namespace]; ok {
		best(Excluded, notRequired("namespace "+c.Namespace, r))
	} else if skip := in.globalSkip(vol); skip != "" && !decided {
		best(Excluded, skip)
	}
	if !decided {
		v.Reason = "no SnapshotPolicy covers it"
	}
	if v.State != Protected {
		v.Policies = nil
		for _, p := range policies {
			v.Policies = append(v.Policies, p.Name)
		}
		sort.Strings(v.Policies)
	}
	return v
}

func notRequired(what, reason string) string {
	s := what + " is annotated " + wellknown.AnnotationBackupNotRequired
	if r := strings.TrimSpace(printable(reason)); r != "" && r != "true" {
		s += ": " + r
	}
	return s
}

// printable drops control characters (escape sequences, tabs) from text
// anyone who may edit a PVC or namespace wrote, before a terminal shows it.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
}

// failing says why p's runs cannot back c up, or "".
func (in Input) failing(p *snapv1.SnapshotPolicy, c *corev1.PersistentVolumeClaim, overlapped map[string]bool) string {
	if p.Spec.ResourcePolicy != nil {
		if err, ok := in.RecipeErrors[p.Namespace+"/"+p.Spec.ResourcePolicy.Name]; ok {
			return "its " + err
		}
	}
	if overlapped[p.Namespace+"/"+p.Name+"/"+c.Name] {
		return "two of its sources cover this PVC, so every firing leaves it out"
	}
	if meta.IsStatusConditionTrue(p.Status.Conditions, wellknown.ConditionStalled) {
		msg := "it is stalled"
		if r := meta.FindStatusCondition(p.Status.Conditions, wellknown.ConditionReady); r != nil && r.Message != "" {
			msg = r.Message
		}
		return msg
	}
	return ""
}

// skipRule names the rule that makes p skip the volume, or "".
func (in Input) skipRule(p *snapv1.SnapshotPolicy, vol volumepolicy.Volume) string {
	var recipe *volumepolicy.Document
	recipeName := ""
	if p.Spec.ResourcePolicy != nil {
		recipeName = p.Namespace + "/" + p.Spec.ResourcePolicy.Name
		recipe = in.Recipes[recipeName]
	}
	d := volumepolicy.Decide(volumepolicy.Merge(recipe, in.Global), vol)
	if !d.Matched || d.Action != "skip" {
		return ""
	}
	cm := in.GlobalName
	if d.Rule.Source == volumepolicy.FromRecipe {
		cm = recipeName
	}
	return fmt.Sprintf("skipped by rule %d of ConfigMap %s", d.Rule.Index, cm)
}

// globalSkip names the global baseline's skip rule for the volume, or "".
func (in Input) globalSkip(vol volumepolicy.Volume) string {
	d := volumepolicy.Decide(volumepolicy.Merge(nil, in.Global), vol)
	if !d.Matched || d.Action != "skip" {
		return ""
	}
	return fmt.Sprintf("skipped by rule %d of the global ConfigMap %s", d.Rule.Index, in.GlobalName)
}

func (in Input) firing(p *snapv1.SnapshotPolicy) (next *metav1.Time, active, named bool) {
	return Firing(in.Schedules, p)
}

// Firing says when the next active schedule of schedules fires p, whether
// one is active, and whether any schedule names p at all.
func Firing(schedules []snapv1.SnapshotSchedule, p *snapv1.SnapshotPolicy) (next *metav1.Time, active, named bool) {
	for i := range schedules {
		s := &schedules[i]
		if s.Namespace != p.Namespace || !fires(s, p) {
			continue
		}
		named = true
		// A suspended schedule, or one stalled on an invalid spec, fires nothing.
		if s.Spec.Schedule.Suspend || meta.IsStatusConditionTrue(s.Status.Conditions, wellknown.ConditionStalled) {
			continue
		}
		active = true
		if n := s.Status.NextSchedule; n != nil && n.At != nil && (next == nil || n.At.Before(next)) {
			next = n.At
		}
	}
	return next, active, named
}

func fires(s *snapv1.SnapshotSchedule, p *snapv1.SnapshotPolicy) bool {
	if r := s.Spec.PolicyRef; r != nil {
		return r.Name == p.Name
	}
	if s.Spec.PolicySelector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(s.Spec.PolicySelector)
	return err == nil && sel.Matches(labels.Set(p.Labels))
}

// Counts tallies verdicts by state, every state present.
func Counts(vs []Verdict) map[State]int {
	out := map[State]int{Protected: 0, Excluded: 0, Failing: 0, Unscheduled: 0, Suspended: 0, Unprotected: 0}
	for _, v := range vs {
		out[v.State]++
	}
	return out
}
