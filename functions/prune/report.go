package prune

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapflow/snapflow/events"
	engine "github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/execute"
	"github.com/snapflow/snapflow/internal/prune/kubeinv"
)

const (
	normal  = corev1.EventTypeNormal
	warning = corev1.EventTypeWarning
)

// planData is the prune planned event's data: the summary, every
// candidate counted by state, and the candidates `snapflow prune plan`
// shows by default (without --show-all), bounded.
func planData(pl engine.Plan, p params) events.PrunePlan {
	d := events.PrunePlan{
		BackupRepo: pl.Repository, Bucket: pl.Bucket, Trigger: p.trigger, Cause: p.cause, Mode: p.mode,
		Namespace: pl.Namespace, Prefix: pl.Prefix, Versioning: string(pl.Versioning), VersioningSource: string(pl.VersioningSource),
		ScannedObjects: pl.ScannedObjects, ScannedBytes: pl.ScannedBytes, EligibleObjects: pl.DeleteObjects, EligibleBytes: pl.DeleteBytes,
		StateCounts: map[string]int{}, Candidates: []events.PruneCandidate{}, Blockers: nonNil(pl.BlockingReasons),
	}
	for _, c := range pl.Candidates {
		d.StateCounts[string(c.State)]++
		if !c.Visible() {
			continue
		}
		if len(d.Candidates) == events.MaxReportedCandidates {
			d.Truncated = true
			continue
		}
		pc := events.PruneCandidate{Type: string(c.Type), State: string(c.State), Prefix: c.Prefix, ObjectCount: c.ObjectCount,
			Bytes: c.Bytes, Deferred: c.DeferredScan, Reason: c.Reason}
		if !c.Backup.IsZero() {
			pc.Backup = c.Backup.String()
		}
		d.Candidates = append(d.Candidates, pc)
	}
	return d
}

// executionData is the prune executed event's data.
func executionData(pl engine.Plan, ex execute.Execution, runErr error, p params) events.PruneExecution {
	objects, bytes, done, failed := ex.Totals()
	d := events.PruneExecution{
		BackupRepo: pl.Repository, Bucket: pl.Bucket, Trigger: p.trigger, Cause: p.cause, Namespace: pl.Namespace, Prefix: pl.Prefix,
		DryRun: ex.DryRun, DeletedCandidates: done, DeletedObjects: objects, DeletedBytes: bytes, FailedCandidates: failed,
		Results: []events.PruneCandidateResult{}, Blockers: nonNil(pl.BlockingReasons),
	}
	for _, r := range ex.Results {
		if len(d.Results) == events.MaxReportedCandidates {
			d.Truncated = true
			break
		}
		d.Results = append(d.Results, events.PruneCandidateResult{Prefix: r.Prefix, Type: string(r.Type), Backup: r.Backup,
			ObjectsDeleted: r.ObjectsDeleted, BytesDeleted: r.BytesDeleted, Deferred: r.Deferred, Error: r.Error})
	}
	if runErr != nil {
		d.Error = runErr.Error()
	}
	return d
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func scopeText(d events.PrunePlan) string {
	switch {
	case d.Prefix != "":
		return "prefix " + d.Prefix
	case d.Namespace != "":
		return "namespace " + d.Namespace
	}
	return "bucket " + d.Bucket
}

// emit sends one result event. Its id hashes the causing event, the scope
// and the data (which carries no clock): a redelivered event that finds
// the same outcome emits the same id, so consumers can drop the duplicate,
// while a different outcome gets a new one.
func (f *Function) emit(ctx context.Context, typ string, p params, data any) error {
	if f.Emitter == nil {
		return nil
	}
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encode %s data: %w", typ, err)
	}
	h := sha256.New()
	for _, s := range []string{typ, p.cause, p.run.BackupRepo, p.run.Namespace, p.run.Prefix, string(b)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	e := cloudevents.NewEvent()
	e.SetID(hex.EncodeToString(h.Sum(nil))[:32])
	e.SetType(typ)
	e.SetSource(events.Source)
	e.SetSubject(p.run.BackupRepo)
	e.SetTime(f.now())
	if err := e.SetData(cloudevents.ApplicationJSON, json.RawMessage(b)); err != nil {
		return err
	}
	return f.Emitter.Emit(ctx, e)
}

// record writes a Kubernetes Event on the BackupRepo (cluster-scoped, so
// the Event lands in the default namespace).
func (f *Function) record(repo *kubeinv.Repo, typ, reason, format string, args ...any) {
	if f.Recorder == nil || repo == nil {
		return
	}
	ref := &corev1.ObjectReference{APIVersion: kubeinv.GVKBackupRepo.GroupVersion().String(), Kind: kubeinv.GVKBackupRepo.Kind,
		Name: repo.Name, UID: types.UID(repo.UID)}
	f.Recorder.Eventf(ref, typ, reason, format, args...)
}
