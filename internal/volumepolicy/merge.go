package volumepolicy

import (
	"fmt"
	"strings"
)

// Where a rule of the effective list came from.
const (
	FromRecipe = "recipe"
	FromGlobal = "global"
)

// Rule is one entry of an effective policy list, with its provenance.
type Rule struct {
	Policy
	// Source is recipe or global; Index is the rule's position in that document.
	Source string `json:"source"`
	Index  int    `json:"index"`
}

// Merge builds the effective list: the recipe's rules, then the global
// baseline's. First match wins, so a recipe overrides the baseline for the
// volumes it names and inherits it for the rest. Either may be nil.
func Merge(recipe, global *Document) []Rule {
	var out []Rule
	if recipe != nil {
		for i, p := range recipe.VolumePolicies {
			out = append(out, Rule{Policy: p, Source: FromRecipe, Index: i})
		}
	}
	if global != nil {
		for i, p := range global.VolumePolicies {
			out = append(out, Rule{Policy: p, Source: FromGlobal, Index: i})
		}
	}
	return out
}

// Decision is what the effective rules say about one volume.
type Decision struct {
	// Matched is false when no rule applies; the recipe's copyMethod decides then.
	Matched bool   `json:"matched"`
	Rule    *Rule  `json:"rule,omitempty"`
	Action  string `json:"action,omitempty"`
}

// Decide returns the first rule whose conditions hold for v.
func Decide(rules []Rule, v Volume) Decision {
	for i := range rules {
		if rules[i].Conditions.Matches(v) {
			r := rules[i]
			return Decision{Matched: true, Rule: &r, Action: r.Action.Type}
		}
	}
	return Decision{}
}

// SourceRef names the ConfigMap a set of rules was read from, at a version.
type SourceRef struct {
	ConfigMap       string `json:"configMap"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// Stamp is what admission records on a new Snapshot: the effective rules
// and the ConfigMaps that contributed them.
type Stamp struct {
	Recipe *SourceRef `json:"recipe,omitempty"`
	Global *SourceRef `json:"global,omitempty"`
	Rules  []Rule     `json:"rules"`
	// Ignored names the global document's sections other than
	// volumePolicies, which never apply; it is reported, not stamped.
	Ignored []string `json:"-"`
}

// IgnoredWarning says that the global document at ref carries sections
// that do not apply globally (as in Velero, only volumePolicies do).
func IgnoredWarning(ref *SourceRef, sections []string) string {
	at := "the global backup volume policies ConfigMap"
	if ref != nil {
		at += " " + ref.ConfigMap
	}
	return fmt.Sprintf("%s carries %s: these sections are ignored globally, only its volumePolicies apply; move them to a Backup's own resourcePolicy, or remove them", at, strings.Join(sections, ", "))
}

// MergeDocuments is Velero's merge for one Backup: the backup's own document
// with the global volumePolicies appended. The backup's other sections are
// kept as they are; the global document's other sections never apply.
func MergeDocuments(backup, global *Document) *Document {
	out := &Document{Version: Version}
	if backup != nil {
		cp := *backup
		cp.VolumePolicies = append([]Policy(nil), backup.VolumePolicies...)
		out = &cp
	}
	if global != nil {
		out.VolumePolicies = append(out.VolumePolicies, global.VolumePolicies...)
	}
	return out
}
