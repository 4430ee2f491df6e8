package coverage

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Spell is one stretch of time a PVC has been Unprotected.
type Spell struct {
	Namespace, PVC string
	UID            types.UID
	// Since is when a pass first found it Unprotected.
	Since time.Time
	// Announced is set once the spell has been told.
	Announced bool
	// Reason is the verdict's reason at this pass (not remembered).
	Reason string
}

// Tracked is what coverage passes remember between them: when the last
// pass began, and the open spells by PVC UID.
type Tracked struct {
	LastPass time.Time
	Spells   map[types.UID]Spell
}

const (
	// MaxRecordBytes bounds the encoded record, well below the 1 MiB an
	// object may hold: PVCs past it are remembered once others close.
	MaxRecordBytes = 700 << 10
	// MaxToldPerPass bounds the spells one pass tells, so a pass stays
	// short however many PVCs turn unprotected at once; the rest are told
	// by the next passes.
	MaxToldPerPass = 100
	// spellOverhead is the encoding of a spell besides its names.
	spellOverhead = 40
)

func spellBytes(uid types.UID, ns, pvc string) int {
	return len(uid) + len(ns) + len(pvc) + spellOverhead
}

// Track is one coverage pass: it opens a spell for every Unprotected PVC
// that has none, closes the spells of PVCs that are no longer Unprotected
// (or gone), and returns the spells open for grace or longer and not yet
// told, oldest first, at most MaxToldPerPass. The caller marks each told
// spell Announced, so a spell is told once; a PVC that turns Unprotected
// again opens a new spell. A PVC is told only once it has been
// Unprotected for grace, as the alert waits, so one applied just before
// its policy is not. New spells take the room left in the record in turn
// by namespace, so one namespace's many PVCs do not crowd out the first
// PVCs of the others.
func Track(prev Tracked, verdicts []Verdict, now time.Time, grace time.Duration) (Tracked, []Spell) {
	next := Tracked{LastPass: now, Spells: map[types.UID]Spell{}}
	size := 64
	fresh := map[string][]Spell{}
	for _, v := range verdicts {
		if v.State != Unprotected || v.UID == "" {
			continue
		}
		sp, ok := prev.Spells[v.UID]
		if !ok {
			fresh[v.Namespace] = append(fresh[v.Namespace], Spell{Namespace: v.Namespace, PVC: v.PVC, UID: v.UID, Since: now, Reason: v.Reason})
			continue
		}
		sp.Reason = v.Reason
		next.Spells[v.UID] = sp
		size += spellBytes(sp.UID, sp.Namespace, sp.PVC)
	}
	namespaces := make([]string, 0, len(fresh))
	for ns, spells := range fresh {
		namespaces = append(namespaces, ns)
		sort.Slice(spells, func(i, j int) bool { return spells[i].PVC < spells[j].PVC })
	}
	sort.Strings(namespaces)
	for round, added := 0, true; added; round++ {
		added = false
		for _, ns := range namespaces {
			if round >= len(fresh[ns]) {
				continue
			}
			sp := fresh[ns][round]
			if n := spellBytes(sp.UID, sp.Namespace, sp.PVC); size+n <= MaxRecordBytes {
				next.Spells[sp.UID] = sp
				size += n
			}
			added = true
		}
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
	if len(due) > MaxToldPerPass {
		due = due[:MaxToldPerPass]
	}
	return next, due
}

// Due says whether a pass should begin at now: every has passed since the
// last one began, or the clock went back.
func (t Tracked) Due(now time.Time, every time.Duration) bool {
	return t.LastPass.IsZero() || !now.Before(t.LastPass.Add(every)) || now.Before(t.LastPass)
}

// record is Tracked as stored: Unix seconds, one array per spell
// [uid, namespace, pvc, since, announced].
type record struct {
	LastPass int64   `json:"lastPass"`
	Spells   [][]any `json:"spells,omitempty"`
}

// Encode is the stored form of t, compact and in a stable order.
func (t Tracked) Encode() ([]byte, error) {
	r := record{LastPass: t.LastPass.Unix()}
	uids := make([]string, 0, len(t.Spells))
	for uid := range t.Spells {
		uids = append(uids, string(uid))
	}
	sort.Strings(uids)
	for _, uid := range uids {
		sp := t.Spells[types.UID(uid)]
		told := 0
		if sp.Announced {
			told = 1
		}
		r.Spells = append(r.Spells, []any{uid, sp.Namespace, sp.PVC, sp.Since.Unix(), told})
	}
	return json.Marshal(r)
}

// DecodeTracked reads what Encode wrote.
func DecodeTracked(b []byte) (Tracked, error) {
	var r struct {
		LastPass int64               `json:"lastPass"`
		Spells   [][]json.RawMessage `json:"spells"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Tracked{}, err
	}
	t := Tracked{Spells: map[types.UID]Spell{}}
	if r.LastPass != 0 {
		t.LastPass = time.Unix(r.LastPass, 0).UTC()
	}
	for i, raw := range r.Spells {
		var sp Spell
		var uid string
		var since int64
		var told int
		if len(raw) != 5 {
			return Tracked{}, fmt.Errorf("spell %d: %d fields, want 5", i, len(raw))
		}
		for j, dst := range []any{&uid, &sp.Namespace, &sp.PVC, &since, &told} {
			if err := json.Unmarshal(raw[j], dst); err != nil {
				return Tracked{}, fmt.Errorf("spell %d field %d: %w", i, j, err)
			}
		}
		sp.UID, sp.Since, sp.Announced = types.UID(uid), time.Unix(since, 0).UTC(), told == 1
		t.Spells[sp.UID] = sp
	}
	return t, nil
}
