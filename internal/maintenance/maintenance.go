// Package maintenance holds the pure decisions of repository maintenance:
// the Maintenance a repository projects for itself, the kopia owner a
// Maintenance runs as, and which run (quick or full) is due now. No client
// or clock of its own: callers pass what they read and now.
package maintenance

import (
	"fmt"
	"strings"
	"time"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/schedule"
	"github.com/snapflow/snapflow/internal/verify"
)

// Modes.
const (
	Quick = "quick"
	Full  = "full"
)

// PhaseRunning is the phase of a run whose Job has not finished.
const PhaseRunning = "Running"

// Defaults are the crons a default Maintenance gets when the repository's
// spec.maintenance.schedule names none: kopia's own cadence, an hourly
// quick and a daily full run, each at a minute stable per repository.
type Defaults struct {
	Quick, Full string
}

// KopiaCadence is kopia's cadence.
var KopiaCadence = Defaults{Quick: "H * * * *", Full: "H H * * *"}

// Wanted says whether a repository should have a default Maintenance:
// unless spec.maintenance.enabled is false or the repository is read-only
// (kopia refuses maintenance on a read-only connection).
func Wanted(spec *snapv1.RepositorySpec) bool {
	if spec.Mode == snapv1.ModeReadOnly {
		return false
	}
	m := spec.Maintenance
	return m == nil || m.Enabled == nil || *m.Enabled
}

// DefaultName is the name of the default Maintenance of ref.
func DefaultName(ref snapv1.RepositoryRef) string {
	if ref.Kind == snapv1.KindClusterRepository {
		return trim("clusterrepository-" + ref.Name)
	}
	return ref.Name
}

func trim(s string) string {
	if len(s) > 253 {
		s = s[:253]
	}
	return strings.TrimRight(s, "-.")
}

// DefaultSpec is the spec of the default Maintenance of a repository.
func DefaultSpec(ref snapv1.RepositoryRef, spec *snapv1.RepositorySpec, d Defaults) snapv1.MaintenanceSpec {
	ref.Namespace = ""
	if ref.Kind == "" {
		ref.Kind = snapv1.KindRepository
	}
	s := snapv1.MaintenanceSchedule{Quick: &snapv1.CronSpec{Cron: d.Quick}, Full: &snapv1.CronSpec{Cron: d.Full}}
	if m := spec.Maintenance; m != nil && m.Schedule != nil {
		if m.Schedule.Quick != nil {
			s.Quick = m.Schedule.Quick.DeepCopy()
		}
		if m.Schedule.Full != nil {
			s.Full = m.Schedule.Full.DeepCopy()
		}
	}
	return snapv1.MaintenanceSpec{Repository: ref, Schedule: &s}
}

// Owner is the kopia user@host a Maintenance runs as: its ownership.owner,
// or snapflow@<cluster> where cluster is the repository's
// identityDefaults.cluster, else clusterID (the kube-system namespace's
// UID), which tells clusters apart without configuration.
func Owner(m *snapv1.Maintenance, repo *snapv1.RepositorySpec, clusterID string) string {
	if o := m.Spec.Ownership; o != nil && o.Owner != "" {
		return o.Owner
	}
	cluster := clusterID
	if id := repo.IdentityDefaults; id != nil && id.Cluster != "" {
		cluster = id.Cluster
	}
	return "snapflow@" + cluster
}

// Decision is the run to start now, if any.
type Decision struct {
	Due  bool
	Mode string
	Slot time.Time
	// Requested says the run answers a run-requested annotation, not a
	// cron slot.
	Requested bool
	Reason    string
}

// Schedules are a Maintenance's resolved crons; nil means that mode runs
// only on request.
type Schedules struct {
	Quick, Full *schedule.Spec
}

// Resolve turns a Maintenance's crons into schedules, with the
// repository's scheduleDefaults and a per-object seed for H and jitter.
func Resolve(m *snapv1.Maintenance, repo *snapv1.RepositorySpec) (Schedules, error) {
	var out Schedules
	s := m.Spec.Schedule
	if s == nil {
		return out, nil
	}
	var defaults []schedule.Defaults
	if sd := repo.ScheduleDefaults; sd != nil {
		defaults = append(defaults, schedule.Defaults{Timezone: sd.Timezone, Jitter: sd.Jitter})
	}
	for _, x := range []struct {
		mode string
		cs   *snapv1.CronSpec
		dst  **schedule.Spec
	}{{Quick, s.Quick, &out.Quick}, {Full, s.Full, &out.Full}} {
		if x.cs == nil || x.cs.Cron == "" {
			continue
		}
		res, err := schedule.Resolve(x.cs.Cron, x.cs.Timezone, x.cs.Jitter, defaults, m.Namespace+"/"+m.Name+"/"+x.mode, string(m.UID)+"/"+x.mode)
		if err != nil {
			return Schedules{}, fmt.Errorf("spec.schedule.%s: %w", x.mode, err)
		}
		spec := res.Spec
		*x.dst = &spec
	}
	return out, nil
}

// Due decides the run to start: a manual request first, then a due full
// run (which does all a quick one does), then a due quick one. last gives
// each mode's last slot; a mode never run counts from created, so a new
// Maintenance waits for its first slot instead of starting at once.
func Due(s Schedules, last map[string]time.Time, created time.Time, requested *time.Time, requestedMode string, now time.Time) (Decision, error) {
	if requested != nil {
		prev, ok := last[requestedMode]
		var p *time.Time
		if ok {
			p = &prev
		}
		d, err := verify.Due(nil, p, requested, now)
		if err != nil {
			return Decision{}, err
		}
		if d.Due {
			return Decision{Due: true, Mode: requestedMode, Slot: d.Slot, Requested: true, Reason: d.Reason}, nil
		}
	}
	for _, x := range []struct {
		mode string
		spec *schedule.Spec
	}{{Full, s.Full}, {Quick, s.Quick}} {
		if x.spec == nil {
			continue
		}
		from, ok := last[x.mode]
		if !ok {
			from = created
		}
		d, err := verify.Due(x.spec, &from, nil, now)
		if err != nil {
			return Decision{}, err
		}
		if d.Due {
			return Decision{Due: true, Mode: x.mode, Slot: d.Slot, Reason: d.Reason}, nil
		}
	}
	return Decision{}, nil
}

// LastSlots reads each mode's last slot from status.
func LastSlots(st *snapv1.MaintenanceStatus) map[string]time.Time {
	out := map[string]time.Time{}
	for _, r := range st.Runs {
		out[r.Mode] = r.Slot.Time
	}
	return out
}

// Running is the run in progress, if any: one Maintenance runs one Job at
// a time.
func Running(st *snapv1.MaintenanceStatus) *snapv1.MaintenanceRun {
	for i := range st.Runs {
		if st.Runs[i].Phase == PhaseRunning {
			return &st.Runs[i]
		}
	}
	return nil
}
