package schedule

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/internal/coverage"
)

const (
	// CoverageRecord is the ConfigMap, in the functions' namespace, that
	// remembers the open unprotected spells between passes: a PVC is not
	// snapflow's to annotate, and the functions keep nothing in memory.
	CoverageRecord = "snapflow-coverage"
	coverageKey    = "tracked.json"

	// DefaultCoverageEvery is how often a pass judges every PVC.
	DefaultCoverageEvery = 5 * time.Minute
	// DefaultCoverageGrace is how long a PVC stays Unprotected before it
	// is told, as SnapflowPVCUnprotected waits.
	DefaultCoverageGrace = time.Hour

	// ReasonUnprotected is the Kubernetes Event on an unprotected PVC.
	ReasonUnprotected = "Unprotected"
)

// coveragePass judges every PVC at most once per CoverageEvery and tells
// each PVC that has been Unprotected for CoverageGrace, once per spell, as
// a dev.snapflow.coverage.unprotected CloudEvent and a Warning Event on
// the PVC. Passes run on ticks and resyncs; the record in CoverageRecord
// decides whether one is due, and a pass claims it (a write under the
// read's resourceVersion) before it judges or tells anything, so two
// replicas or two overlapping events never run one pass twice. A pass
// that fails only logs: the tick's schedules are not retried for it, and
// the next pass comes after CoverageEvery.
func (f *Function) coveragePass(ctx context.Context) {
	if f.Namespace == "" || f.CoverageEvery < 0 {
		return
	}
	every, grace := f.CoverageEvery, f.CoverageGrace
	if every == 0 {
		every = DefaultCoverageEvery
	}
	if grace == 0 {
		grace = DefaultCoverageGrace
	}
	now := f.now()
	log := host.Log(ctx).WithValues("record", f.Namespace+"/"+CoverageRecord)
	cm, prev, err := f.readRecord(ctx)
	if err != nil {
		log.Error(err, "coverage pass skipped")
		return
	}
	if !prev.Due(now, every) {
		return
	}
	claimed := prev
	claimed.LastPass = now
	if err := f.writeRecord(ctx, cm, claimed); apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return // another pass claimed it
	} else if err != nil {
		log.Error(err, "coverage pass skipped")
		return
	}
	// Whether a PVC is Unprotected never depends on a policy's
	// resourcePolicy, so those are not read. A partial read is no read:
	// it would show excluded PVCs as unprotected.
	in, _, err := coverage.Read(ctx, f.Client, "", f.GlobalVolumePolicies, coverage.ReadOptions{Strict: true, SkipRecipes: true})
	if err != nil {
		log.Error(err, "coverage pass failed; the next one comes after the pass interval", "every", every.String())
		return
	}
	next, due := coverage.Track(prev, coverage.Verdicts(in), now, grace)
	for _, sp := range due {
		if err := f.tellUnprotected(ctx, sp, grace); err != nil {
			// Not marked: the next pass tells it again, under the same id.
			log.Error(err, "could not send the coverage unprotected event", "pvc", sp.Namespace+"/"+sp.PVC)
			continue
		}
		sp.Announced = true
		next.Spells[sp.UID] = sp
	}
	if err := f.writeRecord(ctx, cm, next); err != nil {
		// The told spells are told again by a later pass, under their ids.
		log.Error(err, "could not record the coverage pass")
	}
}

// readRecord reads CoverageRecord; an absent one is an empty record and
// an unreadable one a fresh start (a later pass then tells the open
// spells again, under new ids).
func (f *Function) readRecord(ctx context.Context) (*corev1.ConfigMap, coverage.Tracked, error) {
	cm := &corev1.ConfigMap{}
	err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: CoverageRecord}, cm)
	if apierrors.IsNotFound(err) {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: CoverageRecord,
			Labels: map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue}}}, coverage.Tracked{}, nil
	}
	if err != nil {
		return nil, coverage.Tracked{}, fmt.Errorf("read the coverage record %s/%s: %w", f.Namespace, CoverageRecord, err)
	}
	tr, err := coverage.DecodeTracked([]byte(cm.Data[coverageKey]))
	if cm.Data[coverageKey] != "" && err != nil {
		host.Log(ctx).Info("the coverage record is unreadable; starting it afresh", "error", err.Error())
	}
	return cm, tr, nil
}

// writeRecord stores t in cm, creating it the first time; cm keeps the
// resourceVersion it was read or last written with, so a write after
// another pass's fails with a conflict.
func (f *Function) writeRecord(ctx context.Context, cm *corev1.ConfigMap, t coverage.Tracked) error {
	raw, err := t.Encode()
	if err != nil {
		return err
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[coverageKey] = string(raw)
	if cm.ResourceVersion == "" {
		err = f.Client.Create(ctx, cm)
	} else {
		err = f.Client.Update(ctx, cm)
	}
	if err != nil {
		return fmt.Errorf("write the coverage record %s/%s: %w", f.Namespace, CoverageRecord, err)
	}
	return nil
}

// tellUnprotected sends one spell's CloudEvent, then its Kubernetes Event.
func (f *Function) tellUnprotected(ctx context.Context, sp coverage.Spell, grace time.Duration) error {
	msg := fmt.Sprintf("PVC %s/%s has been unprotected since %s (%s, for %s or more): cover it with a SnapshotPolicy that a SnapshotSchedule fires, or mark it %s (on the PVC or its namespace) or skip it in a volume policy; snapflow coverage -n %s shows every PVC's state",
		sp.Namespace, sp.PVC, sp.Since.UTC().Format(time.RFC3339), sp.Reason, grace, wellknown.AnnotationBackupNotRequired, sp.Namespace)
	if f.Emitter != nil {
		data := events.CoverageUnprotectedData{Namespace: sp.Namespace, PVC: sp.PVC, UID: string(sp.UID),
			Since: sp.Since.UTC().Format(time.RFC3339), Reason: sp.Reason, Message: msg}
		// The id names the spell: a retry is the same event, the next
		// spell of the PVC a new one.
		e, err := events.New(fmt.Sprintf("%s/unprotected/%d", sp.UID, sp.Since.Unix()), events.CoverageUnprotected, sp.Namespace+"/"+sp.PVC, data)
		if err != nil {
			return err
		}
		if err := f.Emitter.Emit(ctx, e); err != nil {
			return err
		}
	}
	f.event(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: sp.Namespace, Name: sp.PVC, UID: sp.UID}}, true, ReasonUnprotected, "%s", msg)
	return nil
}
