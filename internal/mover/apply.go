package mover

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/internal/kopia"
)

// ErrReportMismatch means a report claims results its work spec did not
// ask for: another source, another kopia snapshot, members the batch did
// not have. Nothing of it is written.
var ErrReportMismatch = errors.New("the mover's report does not match its work spec")

// Apply writes r onto the status of spec's target with c, as the function
// that made the mover Job does once the Job has finished. spec is the work
// spec that function wrote, never anything the report says about itself:
// the report only fills in the results of that work. Applying a report
// again changes nothing (a finished target refuses a second result), so
// redelivered events are harmless. A delete run's members with no UID are
// skipped: the caller blanks the members it does not vouch for.
func (r *Report) Apply(ctx context.Context, c client.Client, spec *WorkSpec) error {
	if err := r.check(spec); err != nil {
		return err
	}
	if spec.Operation == OpProbe {
		// Its outcome is a health record (internal/health), which the
		// function writes itself, timed by its own clock.
		return fmt.Errorf("%w: a probe's report is not a run's result (read it with ProbeResult)", ErrReportMismatch)
	}
	if r.Failure == nil && !r.finished(spec.Operation) {
		return fmt.Errorf("%w: it holds no result for a %s run", ErrReportMismatch, spec.Operation)
	}
	k := &KubeReporter{Client: c, Target: spec.Target, Delete: spec.Delete, Verify: spec.Verify, Pin: spec.Pin, Maintenance: spec.Maintenance,
		LogTail: func() string { return r.LogTail }}
	// Started refuses a second result for a finished target. A bootstrap
	// has no such end (its repository is re-connected on each change), and
	// its Initializing phase is the function's to set.
	if spec.Operation != OpBootstrap {
		if err := k.Started(ctx, r.Started); errors.Is(err, ErrAlreadyFinished) {
			return nil
		} else if err != nil {
			return err
		}
	}
	switch spec.Operation {
	case OpSnapshot:
		if r.Snapshot != nil {
			return k.SnapshotDone(ctx, *r.Snapshot)
		}
	case OpBootstrap:
		if r.Bootstrap != nil {
			return k.BootstrapDone(ctx, *r.Bootstrap)
		}
	case OpRestore:
		if r.Resolved != nil {
			if _, err := k.RestoreResolved(ctx, *r.Resolved); err != nil {
				return err
			}
		}
		if r.RestoreProgress != nil {
			if err := k.RestoreProgress(ctx, *r.RestoreProgress); err != nil {
				return err
			}
		}
		if r.Restored != nil {
			return k.RestoreDone(ctx, *r.Restored)
		}
	case OpVerify:
		if r.Verified != nil {
			v := *r.Verified
			v.Work = *spec.Verify
			return k.VerifyDone(ctx, v)
		}
	case OpPin:
		if r.PinnedID != "" {
			return k.PinDone(ctx, spec.Pin.SnapshotID, r.PinnedID, spec.Pin.Pin)
		}
	case OpMaintenance:
		if r.Maintained != nil {
			return k.MaintenanceDone(ctx, *r.Maintained)
		}
	case OpDelete:
		if r.Failure == nil {
			var results []MemberResult
			for _, m := range r.Members {
				if member := spec.Delete.Members[m.Index]; member.UID != "" && !m.Deleted {
					results = append(results, MemberResult{Member: member, Message: m.Message, Class: m.Class})
				}
			}
			return k.DeleteDone(ctx, results)
		}
		k.Delete = &DeleteWork{}
		for _, m := range spec.Delete.Members {
			if m.UID != "" {
				k.Delete.Members = append(k.Delete.Members, m)
			}
		}
	}
	return k.Failed(ctx, *r.Failure, r.FailedAt)
}

// finished says whether r holds the result of an op run.
func (r *Report) finished(op string) bool {
	switch op {
	case OpSnapshot:
		return r.Snapshot != nil
	case OpBootstrap, OpProbe:
		return r.Bootstrap != nil
	case OpRestore:
		return r.Restored != nil
	case OpVerify:
		return r.Verified != nil
	case OpPin:
		return r.PinnedID != ""
	case OpMaintenance:
		return r.Maintained != nil
	case OpDelete:
		return r.Phase == "Done"
	}
	return false
}

// check refuses a report whose results are not those of spec's work.
func (r *Report) check(spec *WorkSpec) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrReportMismatch}, args...)...)
	}
	ns := spec.Target.Namespace
	switch spec.Operation {
	case OpSnapshot:
		if spec.Snapshot == nil {
			return bad("the work spec has no snapshot work")
		}
		if s := r.Snapshot; s != nil && s.Source != spec.Snapshot.Source {
			return bad("it reports kopia source %s, the work was %s", s.Source, spec.Snapshot.Source)
		}
	case OpRestore:
		if spec.Restore == nil {
			return bad("the work spec has no restore work")
		}
		type picked struct {
			id  string
			src kopia.Source
		}
		var got []picked
		if r.Resolved != nil {
			got = append(got, picked{r.Resolved.SnapshotID, r.Resolved.Source})
		}
		if r.Restored != nil && r.Restored.SnapshotID != "" {
			got = append(got, picked{r.Restored.SnapshotID, r.Restored.Source})
		}
		for _, g := range got {
			if want := spec.Restore.SnapshotID; want != "" && g.id != want {
				return bad("it restored kopia snapshot %s, the work named %s", g.id, want)
			}
			if spec.Repository.NamespaceBound {
				if err := ownedBy(g.src, ns); err != nil {
					return bad("%v", err)
				}
			}
		}
	case OpVerify:
		if spec.Verify == nil {
			return bad("the work spec has no verification work")
		}
		if v := r.Verified; v != nil && v.Outcome.SnapshotID != "" && v.Outcome.SnapshotID != spec.Verify.SnapshotID {
			return bad("it verified kopia snapshot %s, the work named %s", v.Outcome.SnapshotID, spec.Verify.SnapshotID)
		}
	case OpPin:
		if spec.Pin == nil {
			return bad("the work spec has no pin work")
		}
	case OpMaintenance:
		if spec.Maintenance == nil {
			return bad("the work spec has no maintenance work")
		}
		if m := r.Maintained; m != nil && m.Result.Owner != spec.Maintenance.Owner {
			return bad("it ran maintenance as %s, the work named %s", m.Result.Owner, spec.Maintenance.Owner)
		}
	case OpDelete:
		if spec.Delete == nil {
			return bad("the work spec has no delete work")
		}
		for _, m := range r.Members {
			if m.Index < 0 || m.Index >= len(spec.Delete.Members) {
				return bad("member %d is outside the batch of %d", m.Index, len(spec.Delete.Members))
			}
		}
	}
	return nil
}

// ProbeOutcome is what a probe's report says, checked against its spec.
type ProbeOutcome struct {
	// Generation is the repository generation the probe's work was for.
	Generation int64
	// Opened is set when the repository opened.
	Opened *BootstrapResult
	// Failure is set when it did not.
	Failure *Failure
}

// ProbeResult reads a probe run's report.
func (r *Report) ProbeResult(spec *WorkSpec) (ProbeOutcome, error) {
	if err := r.check(spec); err != nil {
		return ProbeOutcome{}, err
	}
	if spec.Operation != OpProbe {
		return ProbeOutcome{}, fmt.Errorf("%w: the work spec is a %s run, not a probe", ErrReportMismatch, spec.Operation)
	}
	switch {
	case r.Failure != nil:
		return ProbeOutcome{Generation: spec.Target.Generation, Failure: r.Failure}, nil
	case r.Bootstrap != nil:
		return ProbeOutcome{Generation: spec.Target.Generation, Opened: r.Bootstrap}, nil
	}
	return ProbeOutcome{}, fmt.Errorf("%w: it holds no result for a probe run", ErrReportMismatch)
}
