// Package prune is the orphan-prune function: `snapflow prune` behind
// CloudEvents. A tick (Ping or resync) plans the configured KubeBlocks
// BackupRepo's bucket, and deletes what is eligible only when the
// deployment carries the confirmation word; an S3 bucket notification
// re-plans only the pvc-<uuid> root it touched; a prune requested event
// runs with the CLI's parameters. Results go out as prune planned and
// prune executed events and as Kubernetes Events on the BackupRepo.
//
// The function keeps nothing between events: every run reads the cluster
// and the bucket afresh, and the executor re-checks each candidate before
// deleting it, so a redelivered event re-plans and deletes nothing twice.
package prune

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/functions/host"
	engine "github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/execute"
	"github.com/snapflow/snapflow/internal/prune/kubeinv"
	"github.com/snapflow/snapflow/internal/scheme"
)

// Function is the prune function's configuration and ports.
type Function struct {
	// Client reads the KubeBlocks objects, PVCs, PVs, StorageClasses and
	// the credential Secret. When Config is set, a client built from it
	// with the CLI's rate limits (QPS 20, burst 40) is used instead.
	Client   client.Reader
	Config   *rest.Config
	Settings Settings
	Emitter  host.Emitter
	// Recorder records Kubernetes Events on the BackupRepo.
	Recorder record.EventRecorder
	// Writer, Namespace and Record keep each BackupRepo's last runs in
	// the ConfigMap Record (ledger.ConfigMap when empty) of that namespace
	// (snapflow's own), for the exporter, which serves them as
	// snapflow_prune_blocked. The chart creates it; a nil Writer records
	// nothing. Reading and updating that ConfigMap is the only write the
	// function makes besides Events and its deletions in the bucket.
	Writer    RecordWriter
	Namespace string
	Record    string
	Now       func() time.Time
	// SNS verifies SNS envelopes inside S3 notification events (SNS to
	// SQS without raw delivery); nil is events.NewSNSVerifier(). Unused
	// when Settings.SkipSNSVerify is set.
	SNS *events.SNSVerifier

	// once builds the client from Config: a connection, not state about
	// any event.
	once     sync.Once
	kc       client.Reader
	kubeErr  error
	logNoRep sync.Once
	// snsOnce builds the default verifier; its certificate cache is not
	// state about any event.
	snsOnce sync.Once
}

// snsDecoder decodes S3 notifications, verifying SNS signatures unless
// the deployment turned that off.
func (f *Function) snsDecoder() events.S3Decoder {
	if f.Settings.SkipSNSVerify {
		return events.S3Decoder{}
	}
	f.snsOnce.Do(func() {
		if f.SNS == nil {
			f.SNS = events.NewSNSVerifier()
		}
		if len(f.SNS.Topics) == 0 {
			f.SNS.Topics = f.Settings.SNSTopics
		}
		if f.SNS.MaxAge == 0 {
			f.SNS.MaxAge = f.Settings.SNSMaxAge
		}
	})
	return events.S3Decoder{SNS: f.SNS}
}

func (f *Function) now() time.Time { return host.Now(f.Now) }

func (f *Function) kube() (client.Reader, error) {
	if f.Config == nil {
		if f.Client == nil {
			return nil, errors.New("the prune function has no Kubernetes client")
		}
		return f.Client, nil
	}
	f.once.Do(func() {
		cfg := rest.CopyConfig(f.Config)
		cfg.QPS, cfg.Burst, cfg.UserAgent = 20, 40, "snapflow-prune"
		if cfg.Timeout == 0 {
			cfg.Timeout = 30 * time.Second
		}
		f.kc, f.kubeErr = client.New(cfg, client.Options{Scheme: scheme.New()})
		if f.kubeErr != nil {
			f.kubeErr = fmt.Errorf("build the Kubernetes client of the prune function: %w", f.kubeErr)
		}
	})
	return f.kc, f.kubeErr
}

// Handle is the CloudEvents entry point.
func (f *Function) Handle(ctx context.Context, e event.Event) error {
	switch {
	case e.Type() == events.Ping || e.Type() == events.Resync:
		return f.tick(ctx, e)
	case e.Type() == events.PruneRequested:
		return f.handleRequest(ctx, e)
	case events.IsS3Notification(e.Type()):
		return f.handleS3(ctx, e)
	case events.IsAPIServer(e.Type()):
		// The kube source sends every watched kind to every function; the
		// prune function watches nothing, ticks catch up instead.
		return nil
	}
	return fmt.Errorf("%w: the prune function handles %s, S3 notification (%s, %s*), %s and %s events, not %q", events.ErrUnsupported,
		events.PruneRequested, events.S3ObjectNotification, events.S3TypePrefix, events.Resync, events.Ping, e.Type())
}

// cause names the event that started a run; a redelivery has the same.
func cause(e event.Event) string { return e.Source() + "#" + e.ID() }

// tick plans the configured repo, and prunes when the deployment has the
// confirmation word.
func (f *Function) tick(ctx context.Context, e event.Event) error {
	if f.Settings.BackupRepo == "" {
		f.logNoRep.Do(func() {
			host.Log(ctx).Info("no BackupRepo configured (" + envPrefix + "BACKUP_REPO); ticks do nothing")
		})
		return nil
	}
	p, err := f.Settings.params(events.PruneTriggerTick, cause(e))
	if err != nil {
		return err
	}
	if err := p.run.Validate(execute.EnvName); err != nil {
		return err
	}
	return f.runAndReport(ctx, p)
}

// handleRequest runs a prune requested event. A real prune without the
// right confirmation word is refused before any network access.
func (f *Function) handleRequest(ctx context.Context, e event.Event) error {
	var req events.PruneRequest
	if len(e.Data()) > 0 {
		dec := json.NewDecoder(bytes.NewReader(e.Data()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return events.Malformed("prune requested data: %v", err)
		}
	}
	p, err := f.Settings.request(req, cause(e))
	if err != nil {
		return err
	}
	err = f.runAndReport(ctx, p)
	if errors.Is(err, errPrefixAbsent) || apierrors.IsNotFound(err) {
		return events.Malformed("prune requested: %v", err)
	}
	return err
}

// handleS3 re-plans the pvc roots a bucket notification touched; it never
// deletes. Other buckets, non-canonical keys and the test event need no
// work.
func (f *Function) handleS3(ctx context.Context, e event.Event) error {
	n, err := f.snsDecoder().DecodeEvent(ctx, e)
	if err != nil {
		return err
	}
	log := host.Log(ctx)
	if n.Test || len(n.Records) == 0 {
		log.V(1).Info("s3 notification without object records; nothing to do", "test", n.Test)
		return nil
	}
	if f.Settings.BackupRepo == "" {
		log.V(1).Info("no BackupRepo configured; s3 notifications do nothing")
		return nil
	}
	kc, err := f.kube()
	if err != nil {
		return err
	}
	src := &kubeinv.Source{Client: kc, Repo: f.Settings.BackupRepo, Namespace: f.Settings.Namespace}
	repo, err := src.GetRepo(ctx)
	if err != nil {
		return err
	}
	bucket, err := f.bucketOf(ctx, src, repo)
	if err != nil {
		return err
	}
	roots := map[string]bool{}
	for _, r := range n.Records {
		root := rootOf(r.Key)
		switch {
		case r.Bucket != bucket:
			log.V(1).Info("s3 notification for another bucket", "bucket", r.Bucket, "serving", bucket)
		case !r.IsCreated() && !r.IsRemoved():
			log.V(1).Info("s3 notification changes no object", "event", r.EventName)
		case root == "":
			log.V(1).Info("s3 notification outside any pvc root", "key", r.Key)
		default:
			roots[root] = true
		}
	}
	sorted := make([]string, 0, len(roots))
	for r := range roots {
		sorted = append(sorted, r)
	}
	sort.Strings(sorted)
	var errs []error
	for _, root := range sorted {
		prefix, ok := scopeOf(f.Settings.Prefix, root)
		if !ok {
			log.V(1).Info("pvc root outside the configured prefix", "root", root, "prefix", f.Settings.Prefix)
			continue
		}
		p, err := f.Settings.params(events.PruneTriggerS3, cause(e))
		if err != nil {
			return err
		}
		p.mode, p.run.Prefix, p.root = modePlan, prefix, root
		errs = append(errs, f.runAndReportRepo(ctx, src, repo, p))
	}
	return errors.Join(errs...)
}

// bucketOf is the repo's bucket without reading its Secret when the repo
// or the settings name it.
func (f *Function) bucketOf(ctx context.Context, src *kubeinv.Source, repo *kubeinv.Repo) (string, error) {
	if b := repo.ConfigBucket(); b != "" {
		return b, nil
	}
	if f.Settings.Bucket != "" {
		return f.Settings.Bucket, nil
	}
	s, err := src.ResolveS3(ctx, repo, f.Settings.S3Flags())
	if err != nil {
		return "", err
	}
	return s.Bucket, nil
}

// runAndReport reads the repo, runs and reports.
func (f *Function) runAndReport(ctx context.Context, p params) error {
	kc, err := f.kube()
	if err != nil {
		return err
	}
	src := &kubeinv.Source{Client: kc, Repo: p.run.BackupRepo, Namespace: p.run.Namespace}
	repo, err := src.GetRepo(ctx)
	if err != nil {
		return err
	}
	return f.runAndReportRepo(ctx, src, repo, p)
}

// runAndReportRepo runs p and reports the plan and the execution. A run that
// could not plan is retried by the sender (500); one that stopped on
// blockers or the global guards is reported and acknowledged, as only an
// operator can change that; failed candidates and a stale plan ask for a
// retry, which re-plans and converges.
func (f *Function) runAndReportRepo(ctx context.Context, src *kubeinv.Source, repo *kubeinv.Repo, p params) error {
	ctx, cancel := context.WithTimeout(ctx, f.Settings.EffectiveTimeout())
	defer cancel()
	log := host.Log(ctx).WithValues("backupRepo", p.run.BackupRepo, "trigger", p.trigger, "mode", p.mode, "prefix", p.run.Prefix)
	out, err := f.run(ctx, src, repo, p)
	if f.recorded(p) {
		f.remember(ctx, src.Client, runOf(p, f.now(), out, err))
	}
	switch {
	case errors.Is(err, errPrefixAbsent) && p.trigger == events.PruneTriggerS3:
		// The notification's root is gone, typically deleted by a prune:
		// nothing is left to plan.
		log.V(1).Info("pvc root no longer in the bucket; nothing to plan", "root", p.root)
		return nil
	case err != nil:
		f.record(repo, warning, "PruneFailed", "%s run (%s) could not plan: %v", p.trigger, p.mode, err)
		return fmt.Errorf("prune %s of BackupRepo %s: %w", p.mode, p.run.BackupRepo, err)
	case out.skipped != "":
		log.V(1).Info("nothing to plan", "reason", out.skipped)
		return nil
	}
	plan := planData(out.plan, p)
	log.Info("planned", "orphans", plan.StateCounts[string(engine.StateOrphan)], "eligibleObjects", plan.EligibleObjects, "blockers", len(plan.Blockers))
	f.record(repo, normal, "PrunePlanned", "%s plan of %s: %d orphan candidates, %d objects / %d bytes eligible, %d blockers",
		p.trigger, scopeText(plan), plan.StateCounts[string(engine.StateOrphan)], plan.EligibleObjects, plan.EligibleBytes, len(plan.Blockers))
	if err := f.emit(ctx, events.PrunePlanned, p, plan); err != nil {
		return err
	}
	if out.ex == nil {
		return nil
	}
	ex := executionData(out.final, *out.ex, out.runErr, p)
	if err := f.emit(ctx, events.PruneExecuted, p, ex); err != nil {
		return err
	}
	switch {
	case out.runErr == nil && ex.DryRun:
		f.record(repo, normal, "PruneDryRun", "would delete %d objects / %d bytes in %d candidates", ex.DeletedObjects, ex.DeletedBytes, ex.DeletedCandidates)
	case out.runErr == nil:
		log.Info("pruned", "candidates", ex.DeletedCandidates, "objects", ex.DeletedObjects, "bytes", ex.DeletedBytes)
		f.record(repo, normal, "PruneExecuted", "deleted %d objects / %d bytes in %d candidates", ex.DeletedObjects, ex.DeletedBytes, ex.DeletedCandidates)
	default:
		log.Info("prune stopped", "reason", out.runErr.Error(), "deleted", ex.DeletedCandidates, "failed", ex.FailedCandidates)
		f.record(repo, warning, "PruneFailed", "deleted %d objects in %d candidates, %d candidates failed: %v",
			ex.DeletedObjects, ex.DeletedCandidates, ex.FailedCandidates, out.runErr)
	}
	if retryable(out.runErr) {
		return fmt.Errorf("prune of BackupRepo %s: %w", p.run.BackupRepo, out.runErr)
	}
	return nil
}

// retryable says whether running again may succeed without an operator:
// a candidate failed (the store went away mid-run) or the cluster changed
// between plan and execution.
func retryable(err error) bool {
	return errors.Is(err, execute.ErrCandidatesFailed) || errors.Is(err, engine.ErrStalePlan) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}
