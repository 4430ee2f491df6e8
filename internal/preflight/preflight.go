// Package preflight decides whether a backup may start now: a policy's
// spec.preflight checks are CEL predicates over what is known of its
// repository and of that repository's maintenance. A run whose checks do
// not all pass is held, not failed, until they pass or the timeout ends;
// a run that times out fails saying which check held it. No client and no
// clock: the caller reads the objects and passes the time.
package preflight

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/expr"
	"github.com/snapflow/snapflow/internal/mover"
)

// DefaultTimeout is how long checks may hold a run when spec.preflight
// sets no timeout.
const DefaultTimeout = 10 * time.Minute

// Reasons and failure class.
const (
	// ReasonHeld: a check did not pass yet; the run waits.
	ReasonHeld = "PreflightHeld"
	// ReasonPassed: every check passed.
	ReasonPassed = "PreflightPassed"
	// ClassTimeout fails a run whose checks held it past the timeout.
	ClassTimeout = "PreflightTimeout"
)

// Timeout is spec.preflight.timeout with its default; zero holds forever.
// Admission refused values that do not parse, so one that does not falls
// back to the default instead of holding for ever.
func Timeout(p *snapv1.Preflight) time.Duration {
	switch {
	case p == nil || p.Timeout == "":
		return DefaultTimeout
	case p.Timeout == "0":
		return 0
	}
	d, err := time.ParseDuration(p.Timeout)
	if err != nil || d < 0 {
		return DefaultTimeout
	}
	return d
}

// Vars are the variables a check sees. A value that has not been
// observed is left out, beside its "...Known" flag that is always there:
// an expression that reads it without checking the flag cannot be
// evaluated, and so holds the run rather than passing on a made-up zero.
func Vars(repo *snapv1.RepositoryStatus, maintenances []snapv1.Maintenance, now time.Time) map[string]any {
	r := map[string]any{
		"phase": "", "ready": false, "backendReachable": false,
		"snapshotCountKnown": false, "indexBlobCountKnown": false, "sizeBytesKnown": false,
		"lastHealthyKnown": false, "lastReverifyKnown": false,
	}
	if repo != nil {
		r["phase"] = string(repo.Phase)
		r["ready"] = repo.Phase == snapv1.RepositoryReady
		if c := meta.FindStatusCondition(repo.Conditions, wellknown.ConditionBackendReachable); c != nil {
			r["backendReachable"] = c.Status == metav1.ConditionTrue
		} else {
			// Before the first probe, a Ready repository was just opened.
			r["backendReachable"] = repo.Phase == snapv1.RepositoryReady
		}
		if ss := repo.StorageStats; ss != nil {
			known(r, "snapshotCount", ss.SnapshotCount)
			known(r, "indexBlobCount", ss.IndexBlobCount)
			known(r, "sizeBytes", ss.TotalSize)
		}
		if t := lastHealthy(repo); !t.IsZero() {
			r["lastHealthyKnown"], r["lastHealthyAgeSeconds"] = true, age(now, t)
		}
		if t := repo.LastReverifyAt; t != nil {
			r["lastReverifyKnown"], r["lastReverifyAgeSeconds"] = true, age(now, t.Time)
		}
	}
	m := map[string]any{"hasRun": false}
	if t := lastMaintained(maintenances); !t.IsZero() {
		m["hasRun"], m["lastSuccessAgeSeconds"] = true, age(now, t)
	}
	return map[string]any{"repository": r, "maintenance": m}
}

// unobserved says whether err is a read of a value not observed yet (and
// not of a key that never exists, a typo admission let through).
func unobserved(err error) bool {
	for v := range expr.PreflightGuards {
		_, key, _ := strings.Cut(v, ".")
		if strings.Contains(err.Error(), "no such key: "+key) {
			return true
		}
	}
	return false
}

func known(m map[string]any, key string, v *int64) {
	if v != nil {
		m[key+"Known"], m[key] = true, *v
	}
}

func age(now, t time.Time) int64 { return max(0, int64(now.Sub(t)/time.Second)) }

// lastHealthy is when the repository was last seen open and healthy: its
// last successful connect or probe, while it is Ready.
func lastHealthy(st *snapv1.RepositoryStatus) time.Time {
	if st.Phase != snapv1.RepositoryReady {
		return time.Time{}
	}
	var t time.Time
	if ss := st.StorageStats; ss != nil && ss.LastObservedAt != nil {
		t = ss.LastObservedAt.Time
	}
	if p := st.Probe; p != nil && p.ConsecutiveFailures == 0 && p.LastProbeAt != nil && p.LastProbeAt.After(t) {
		t = p.LastProbeAt.Time
	}
	if c := meta.FindStatusCondition(st.Conditions, wellknown.ConditionReady); t.IsZero() && c != nil && c.Status == metav1.ConditionTrue {
		t = c.LastTransitionTime.Time
	}
	return t
}

// lastMaintained is when any of the repository's Maintenances last
// finished a successful run, quick or full.
func lastMaintained(ms []snapv1.Maintenance) time.Time {
	var t time.Time
	later := func(c *metav1.Time) {
		if c != nil && c.After(t) {
			t = c.Time
		}
	}
	for i := range ms {
		st := &ms[i].Status
		later(st.LastFullSucceeded)
		for _, r := range st.Runs {
			if r.Phase == mover.MaintenanceSucceeded {
				later(r.CompletedAt)
			}
		}
	}
	return t
}

// Verdict is what the checks decided for a run.
type Verdict struct {
	// Pass lets the run start.
	Pass bool
	// TimedOut fails the run: the checks held it past the timeout.
	TimedOut bool
	// Message says which check holds the run and why, or that all passed.
	Message string
}

// Decide evaluates the checks in order; the first that does not pass holds
// the run. since is when checks first held it (zero: not yet). A check
// that cannot be evaluated holds too: a gate that cannot say yes is not a
// yes.
func Decide(p *snapv1.Preflight, vars map[string]any, since, now time.Time) Verdict {
	if p == nil || len(p.Checks) == 0 {
		return Verdict{Pass: true}
	}
	held := ""
	for _, c := range p.Checks {
		prg, err := expr.Preflight.Compile(c.Expr)
		if err != nil {
			held = fmt.Sprintf("preflight check %q cannot run: expr %v", c.Name, err)
			break
		}
		ok, err := prg.EvalBool(vars)
		if err != nil {
			held = fmt.Sprintf("preflight check %q cannot run: %v", c.Name, err)
			if unobserved(err) {
				held = fmt.Sprintf("preflight check %q reads a value snapflow has not observed yet (%v); guard it with its ...Known flag, or hasRun for maintenance", c.Name, err)
			}
			break
		}
		if !ok {
			held = fmt.Sprintf("preflight check %q does not pass (%s)", c.Name, c.Expr)
			if c.Message != "" {
				held = fmt.Sprintf("preflight check %q does not pass: %s (%s)", c.Name, c.Message, c.Expr)
			}
			break
		}
	}
	if held == "" {
		return Verdict{Pass: true, Message: fmt.Sprintf("all %d preflight check(s) passed", len(p.Checks))}
	}
	timeout := Timeout(p)
	if since.IsZero() {
		since = now
	}
	if timeout == 0 {
		return Verdict{Message: held + "; the run waits until it passes (spec.preflight.timeout is 0)"}
	}
	if waited := now.Sub(since); waited >= timeout {
		return Verdict{TimedOut: true, Message: fmt.Sprintf("%s after %s, the spec.preflight.timeout; the run was not started", held, timeout)}
	}
	return Verdict{Message: fmt.Sprintf("%s; the run waits until it passes, at most until %s", held, since.Add(timeout).UTC().Format(time.RFC3339))}
}
