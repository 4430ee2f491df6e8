package mover

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/kopia"
)

// OpMaintenance runs kopia's quick or full maintenance on a repository.
const OpMaintenance = "maintenance"

// MaintenanceWork is one maintenance run of a Maintenance.
type MaintenanceWork struct {
	// Mode is quick or full.
	Mode string    `json:"mode"`
	Slot time.Time `json:"slot"`
	// Owner is the kopia user@host the run claims ownership as.
	Owner    string   `json:"owner"`
	Aliases  []string `json:"aliases,omitempty"`
	Takeover bool     `json:"takeover,omitempty"`
	// Safety is full (kopia's margins) or none.
	Safety string `json:"safety,omitempty"`
}

// MaintenanceReport is what one maintenance run did.
type MaintenanceReport struct {
	Result kopia.MaintainResult `json:"result"`
	// Message says what the run did, or who owns maintenance when skipped.
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at"`
}

// Run phases of a maintenance mode on the Maintenance's status.
const (
	MaintenanceRunning   = "Running"
	MaintenanceSucceeded = "Succeeded"
	MaintenanceSkipped   = "Skipped"
	MaintenanceFailed    = "Failed"
)

func (w *MaintenanceWork) check() error {
	if w.Mode != kopia.MaintainQuick && w.Mode != kopia.MaintainFull {
		return fmt.Errorf("work spec: maintenance mode %q is neither quick nor full", w.Mode)
	}
	if _, _, ok := splitOwner(w.Owner); !ok {
		return fmt.Errorf("work spec: maintenance owner %q is not user@host", w.Owner)
	}
	return nil
}

func splitOwner(owner string) (user, host string, ok bool) {
	user, host, ok = strings.Cut(owner, "@")
	return user, host, ok && user != "" && host != ""
}

func runMaintenance(ctx context.Context, o Options, open kopia.OpenOptions) (string, error) {
	w := o.Spec.Maintenance
	open.Username, open.Hostname, _ = splitOwner(w.Owner)
	r, err := kopia.Open(ctx, open)
	if err != nil {
		return "", err
	}
	defer r.Close(ctx)
	res, err := r.Maintain(ctx, kopia.MaintainOptions{Mode: w.Mode, Aliases: w.Aliases, Takeover: w.Takeover, Safety: w.Safety})
	rep := MaintenanceReport{Result: res, At: o.Now()}
	switch {
	case errors.Is(err, kopia.ErrNotOwner):
		rep.Message = oneLine(err.Error())
	case err != nil:
		return "", err
	default:
		rep.Message = fmt.Sprintf("%s maintenance as %s in %s", w.Mode, res.Owner, res.Duration.Round(time.Millisecond))
		if res.Counted {
			rep.Message = fmt.Sprintf("%s maintenance as %s: %d blobs (%d bytes) before, %d blobs (%d bytes) after, in %s",
				w.Mode, res.Owner, res.Before.Blobs, res.Before.Bytes, res.After.Blobs, res.After.Bytes, res.Duration.Round(time.Millisecond))
		}
		if res.TookOver {
			prev := res.PreviousOwner
			if prev == "" {
				prev = "nobody"
			}
			rep.Message += fmt.Sprintf("; took the maintenance ownership from %s", prev)
		}
	}
	if err := o.Reporter.MaintenanceDone(ctx, rep); err != nil {
		return "", fmt.Errorf("report the result: %w", err)
	}
	return rep.Message, nil
}

func (k *KubeReporter) isMaintenance() bool { return k.Target.Kind == "Maintenance" }

// maintenanceRun finds (or adds) the status entry of the work's mode.
func maintenanceRun(m *snapv1.Maintenance, mode string) *snapv1.MaintenanceRun {
	for i := range m.Status.Runs {
		if m.Status.Runs[i].Mode == mode {
			return &m.Status.Runs[i]
		}
	}
	m.Status.Runs = append(m.Status.Runs, snapv1.MaintenanceRun{Mode: mode})
	return &m.Status.Runs[len(m.Status.Runs)-1]
}

// updateMaintenance applies mutate to the run entry of this work, unless a
// later slot holds it or it already has this slot's result.
func (k *KubeReporter) updateMaintenance(ctx context.Context, mutate func(*snapv1.Maintenance, *snapv1.MaintenanceRun) error) error {
	w := k.Maintenance
	err := update(ctx, k, &snapv1.Maintenance{}, func(m *snapv1.Maintenance) error {
		r := maintenanceRun(m, w.Mode)
		if r.Slot.After(w.Slot) {
			return errNoChange // a later run owns the entry
		}
		if r.Slot.Time.Equal(w.Slot) && r.Phase != "" && r.Phase != MaintenanceRunning {
			return ErrAlreadyFinished
		}
		return mutate(m, r)
	})
	if errors.Is(err, errNoChange) {
		return nil
	}
	return err
}

// maintenanceStarted refuses a retried pod of a run that already ended.
func (k *KubeReporter) maintenanceStarted(ctx context.Context) error {
	return k.updateMaintenance(ctx, func(*snapv1.Maintenance, *snapv1.MaintenanceRun) error { return errNoChange })
}

// MaintenanceDone records the run's outcome on the Maintenance.
func (k *KubeReporter) MaintenanceDone(ctx context.Context, rep MaintenanceReport) error {
	err := k.updateMaintenance(ctx, func(m *snapv1.Maintenance, r *snapv1.MaintenanceRun) error {
		res, w := rep.Result, k.Maintenance
		at := metav1.NewTime(rep.At)
		r.Slot, r.CompletedAt, r.Message, r.Safety = metav1.NewTime(w.Slot), &at, rep.Message, w.Safety
		if r.Safety == "" {
			r.Safety = kopia.SafetyFull
		}
		m.Status.Owner, m.Status.RepositoryOwner = res.Owner, res.PreviousOwner
		if res.Skipped {
			r.Phase = MaintenanceSkipped
			meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: wellknown.ConditionMaintenanceOwned, Status: metav1.ConditionFalse,
				Reason: "OwnedElsewhere", Message: rep.Message, ObservedGeneration: m.Generation})
			meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse,
				Reason: "OwnedElsewhere", Message: rep.Message, ObservedGeneration: m.Generation})
			return nil
		}
		m.Status.RepositoryOwner = res.Owner
		r.Phase = MaintenanceSucceeded
		r.DurationSeconds = ptr(int64(res.Duration.Round(time.Second) / time.Second))
		r.BlobsBefore, r.BytesBefore, r.BlobsAfter, r.BytesAfter, r.ReclaimedBytes, r.ReclaimableBytes = nil, nil, nil, nil, nil, nil
		if res.Counted {
			reclaimed := max(res.Before.Bytes-res.After.Bytes, 0)
			r.BlobsBefore, r.BytesBefore, r.BlobsAfter, r.BytesAfter = ptr(res.Before.Blobs), ptr(res.Before.Bytes), ptr(res.After.Blobs), ptr(res.After.Bytes)
			r.ReclaimedBytes = ptr(reclaimed)
			if rec, ok := res.Reclaimable(); ok {
				r.ReclaimableBytes = ptr(rec)
			}
		}
		if w.Mode == kopia.MaintainFull {
			m.Status.LastFullSucceeded, m.Status.LastReclaimedBytes = &at, r.ReclaimedBytes
		}
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: wellknown.ConditionMaintenanceOwned, Status: metav1.ConditionTrue,
			Reason: "Owner", Message: "this Maintenance owns the repository's kopia maintenance as " + res.Owner, ObservedGeneration: m.Generation})
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionTrue,
			Reason: "Maintained", Message: rep.Message, ObservedGeneration: m.Generation})
		return nil
	})
	if errors.Is(err, ErrAlreadyFinished) {
		return nil
	}
	return err
}

func (k *KubeReporter) maintenanceFailed(ctx context.Context, f Failure, at time.Time) error {
	err := k.updateMaintenance(ctx, func(m *snapv1.Maintenance, r *snapv1.MaintenanceRun) error {
		t := metav1.NewTime(at)
		msg := fmt.Sprintf("%s maintenance failed (%s): %s", k.Maintenance.Mode, f.Class, f.Message)
		if f.Hint != "" {
			msg += "; " + f.Hint
		}
		r.Slot, r.Phase, r.Message, r.CompletedAt = metav1.NewTime(k.Maintenance.Slot), MaintenanceFailed, msg, &t
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse,
			Reason: f.Class, Message: msg, ObservedGeneration: m.Generation})
		return nil
	})
	if errors.Is(err, ErrAlreadyFinished) {
		return nil
	}
	return err
}

// MaintenanceDone records the outcome for the termination message.
func (f *Recorder) MaintenanceDone(_ context.Context, res MaintenanceReport) error {
	return f.write(func(r *Report) {
		r.Phase, r.Maintained = MaintenanceSucceeded, &res
		if res.Result.Skipped {
			r.Phase = MaintenanceSkipped
		}
	})
}
