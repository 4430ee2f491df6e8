package execute

import (
	"context"
	"time"

	"github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/kubeinv"
	"github.com/snapflow/snapflow/internal/prune/s3store"
)

// Mode is how far a Pipeline run goes.
type Mode int

const (
	// ModePlan scans and classifies; nothing is deleted.
	ModePlan Mode = iota
	// ModeDryRun also says what a prune would do, re-checking nothing.
	ModeDryRun
	// ModeDelete runs the executor: each candidate is re-checked against
	// the cluster and the bucket right before it is deleted.
	ModeDelete
)

// Pipeline is one prune run from the cluster and the bucket as they are
// now: the S3 settings (flags over the BackupRepo's and its Secret's), the
// inventory, the bucket's versioning, the discovery scan and
// classification, then the dry run or the executor. `snapflow prune` and
// the prune function both run it; nothing survives a run.
type Pipeline struct {
	Source *kubeinv.Source
	Repo   *kubeinv.Repo
	// Settings are the run's, validated by the caller (Settings.Validate).
	Settings Settings
	Mode     Mode
	Now      func() time.Time

	// Inventory, when set, looks at the inventory before any S3 request;
	// a non-empty answer ends the run there, as Outcome.Skipped.
	Inventory func(prune.Inventory) string
	// Configure, when set, may adjust the store's configuration (debug
	// output) once the settings and the inventory are known.
	Configure func(kubeinv.S3Settings, prune.Inventory, *s3store.Config)
	// Store, when set, wraps the bucket (progress, a listing watch).
	Store func(*s3store.Store) Store
	// Planned, when set, is told once the plan is built.
	Planned func(prune.Plan)
	// Progress is the executor's, told about every finished candidate.
	Progress func(done, total int)
}

// Outcome is what a Pipeline run produced.
type Outcome struct {
	// Plan is the scan's plan; Final the plan after the executor
	// re-checked each candidate (Plan itself for a plan or a dry run).
	Plan, Final prune.Plan
	// Execution is nil for ModePlan.
	Execution *Execution
	// RunErr is why a dry run or prune did not complete (blockers, a
	// stale plan, failed candidates); the plan and execution still stand.
	RunErr error
	// Skipped is the Inventory hook's reason when it ended the run.
	Skipped string
	// S3 are the settings the run used (their Secrets redacted in String).
	S3 kubeinv.S3Settings
}

// Run runs the pipeline. An error means no plan was made.
func (p Pipeline) Run(ctx context.Context) (Outcome, error) {
	var res Outcome
	versioning, err := p.Settings.Versioning(FlagName)
	if err != nil {
		return res, err
	}
	settings, err := p.Source.ResolveS3(ctx, p.Repo, p.Settings.S3Flags())
	if err != nil {
		return res, err
	}
	res.S3 = settings
	in, err := p.Source.Input(ctx, p.Repo)
	if err != nil {
		return res, err
	}
	inv := prune.BuildInventory(in)
	if p.Inventory != nil {
		if res.Skipped = p.Inventory(inv); res.Skipped != "" {
			return res, nil
		}
	}
	cfg := settings.StoreConfig()
	if p.Configure != nil {
		p.Configure(settings, inv, &cfg)
	}
	st, err := s3store.New(cfg)
	if err != nil {
		return res, err
	}
	detected := ""
	if prune.NeedsVersioningQuery(versioning) {
		if detected, err = st.BucketVersioning(ctx); err != nil {
			return res, settings.Explain(err)
		}
	}
	opts := p.Settings.Options()
	if opts.Versioning, opts.VersioningSource, err = prune.ResolveVersioning(versioning, detected); err != nil {
		return res, err
	}
	var store Store = st
	if p.Store != nil {
		store = p.Store(st)
	}
	now := p.Now
	if now == nil {
		now = time.Now
	}
	pl, err := BuildPlan(ctx, store, PlanInput{Inventory: inv, Options: opts, Now: now()})
	if err != nil {
		return res, settings.Explain(err)
	}
	res.Plan, res.Final = pl, pl
	if p.Planned != nil {
		p.Planned(pl)
	}
	switch p.Mode {
	case ModeDryRun:
		ex := DryRun(pl)
		res.Execution = &ex
	case ModeDelete:
		fin, ex, runErr := Run(ctx, pl, inv, Config{Store: st, Inventory: p.Source, Concurrency: p.Settings.EffectiveConcurrency(), Now: now, Progress: p.Progress})
		res.Final, res.Execution, res.RunErr = fin, &ex, runErr
	}
	return res, nil
}
