package coverage

import (
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Spell is one stretch of time a PVC has been Unprotected.
type Spell struct {
	Namespace string    `json:"namespace"`
	PVC       string    `json:"pvc"`
	UID       types.UID `json:"uid"`
	// Since is when a pass first found it Unprotected.
	Since time.Time `json:"since"`
	// Announced is set once the spell has been told.
	Announced bool `json:"announced,omitempty"`
	// Reason is the verdict's reason when last judged.
	Reason string `json:"reason,omitempty"`
}

// Tracked is what coverage passes remember between them: when the last
// pass ran, and the open spells by PVC UID.
type Tracked struct {
	LastPass time.Time           `json:"lastPass"`
	Spells   map[types.UID]Spell `json:"spells,omitempty"`
}

// MaxSpells bounds what is remembered, so the record stays far below an
// object's size limit; the PVCs past it are remembered once others close.
const MaxSpells = 4000

// Track is one coverage pass: it opens a spell for every Unprotected PVC
// that has none, closes the spells of PVCs that are no longer Unprotected
// (or gone), and returns the spells open for grace or longer and not yet
// told, oldest first. The caller marks each told spell Announced, so a
// spell is told once; a PVC that turns Unprotected again opens a new
// spell. A PVC is judged only once it has been Unprotected for grace, as
// the alert waits, so one applied just before its policy is not told.
func Track(prev Tracked, verdicts []Verdict, now time.Time, grace time.Duration) (Tracked, []Spell) {
	next := Tracked{LastPass: now, Spells: map[types.UID]Spell{}}
	var fresh []Spell
	for _, v := range verdicts {
		if v.State != Unprotected || v.UID == "" {
			continue
		}
		sp, ok := prev.Spells[v.UID]
		if !ok {
			fresh = append(fresh, Spell{Namespace: v.Namespace, PVC: v.PVC, UID: v.UID, Since: now, Reason: v.Reason})
			continue
		}
		sp.Reason = v.Reason
		next.Spells[v.UID] = sp
	}
	// New spells fill what room is left, in a stable order, so the same
	// PVCs are remembered pass after pass.
	sort.Slice(fresh, func(i, j int) bool {
		if fresh[i].Namespace != fresh[j].Namespace {
			return fresh[i].Namespace < fresh[j].Namespace
		}
		return fresh[i].PVC < fresh[j].PVC
	})
	for _, sp := range fresh {
		if len(next.Spells) >= MaxSpells {
			break
		}
		next.Spells[sp.UID] = sp
	}
	var due []Spell
	for _, sp := range next.Spells {
		if !sp.Announced && !now.Before(sp.Since.Add(grace)) {
			due = append(due, sp)
		}
	}
	sort.Slice(due, func(i, j int) bool {
		if !due[i].Since.Equal(due[j].Since) {
			return due[i].Since.Before(due[j].Since)
		}
		if due[i].Namespace != due[j].Namespace {
			return due[i].Namespace < due[j].Namespace
		}
		return due[i].PVC < due[j].PVC
	})
	return next, due
}

// Due says whether a pass should run at now: every has passed since the
// last one, or the clock went back.
func (t Tracked) Due(now time.Time, every time.Duration) bool {
	return t.LastPass.IsZero() || !now.Before(t.LastPass.Add(every)) || now.Before(t.LastPass)
}
