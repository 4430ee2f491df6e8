package prune

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/snapflow/snapflow/events"
	engine "github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/execute"
)

// Settings configure one deployment of the prune function: the run
// settings `snapflow prune` takes as flags (execute.Settings, from the
// KBBACKUP_PRUNE_* variables), the confirmation word that lets ticks
// delete, and how S3 notifications are authenticated. The zero value is
// the CLI's defaults with no repo and no word (plan only).
type Settings struct {
	// Settings.BackupRepo is the repo ticks and S3 notifications work on.
	// Without one, ticks and notifications do nothing and requests must
	// name a repo.
	execute.Settings
	// Confirm is the confirmation word (DELETE, DELETE-STRAY, ...): with it
	// a tick, and a request with dryRun false, deletes what the plan finds
	// eligible; empty, the deployment only plans and dry-runs. Events never
	// carry a word of their own: whoever can send one must not be able to
	// authorise a deletion.
	Confirm string

	// SkipSNSVerify accepts SNS envelopes inside S3 notification events
	// without checking their signature (KBBACKUP_PRUNE_SNS_VERIFY=false).
	SkipSNSVerify bool
	// SNSTopics are the TopicArns whose signed SNS envelopes are accepted
	// (KBBACKUP_PRUNE_SNS_TOPIC_ARNS, comma-separated); once listed, an
	// unsigned S3, SQS or EventBridge body is refused too. With none, every
	// SNS envelope is refused unless SkipSNSVerify.
	SNSTopics []string
	// SNSMaxAge bounds a signed SNS message's age (KBBACKUP_PRUNE_SNS_MAX_AGE;
	// 0: events.DefaultSNSMaxAge).
	SNSMaxAge time.Duration
}

const envPrefix = execute.EnvPrefix

// FromEnv reads Settings from KBBACKUP_PRUNE_<FLAG> variables: the run
// settings as execute.FromEnv reads them for every flag of `snapflow
// prune`, then the deployment's _CONFIRM and the SNS variables. An empty
// variable counts as unset.
func FromEnv(getenv func(string) string) (Settings, error) {
	run, err := execute.FromEnv(getenv)
	s := Settings{Settings: run, Confirm: strings.TrimSpace(getenv(envPrefix + "CONFIRM"))}
	errs := []error{err}
	get := func(name string) string { return strings.TrimSpace(getenv(envPrefix + name)) }
	if v := get("SNS_VERIFY"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%sSNS_VERIFY=%q: want true or false", envPrefix, v))
		}
		s.SkipSNSVerify = err == nil && !b
	}
	for _, arn := range strings.Split(get("SNS_TOPIC_ARNS"), ",") {
		if arn = strings.TrimSpace(arn); arn == "" {
			continue
		}
		if !strings.HasPrefix(arn, "arn:") || strings.Count(arn, ":") != 5 {
			errs = append(errs, fmt.Errorf("%sSNS_TOPIC_ARNS: %q is not an SNS topic ARN (arn:aws:sns:<region>:<account>:<topic>)", envPrefix, arn))
			continue
		}
		s.SNSTopics = append(s.SNSTopics, arn)
	}
	if v := get("SNS_MAX_AGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%sSNS_MAX_AGE=%q: want a Go duration such as 168h: %w", envPrefix, v, err))
		}
		s.SNSMaxAge = d
	}
	if err := errors.Join(errs...); err != nil {
		return s, err
	}
	return s, s.Validate()
}

// Validate checks the settings as `snapflow prune` checks its flags, so a
// misconfigured deployment fails at start-up rather than at its first tick.
func (s Settings) Validate() error {
	if s.Confirm != "" && s.checkConfirm() != nil {
		// Only the operator sees this (start-up), so it may name the word.
		return fmt.Errorf("%sCONFIRM is %q but these settings need %s", envPrefix, s.Confirm,
			engine.ConfirmationWord(s.IncludeRetained, s.DeleteRepositoryStray))
	}
	run := s.Settings
	if run.BackupRepo == "" {
		run.BackupRepo = "-" // a repo is only required once an event needs one
	}
	return run.Validate(execute.EnvName)
}

// Run modes, as `snapflow prune` prints them.
const (
	modePlan   = "plan"
	modeDryRun = "dry-run"
	modeDelete = "delete"
)

// params are the parameters of one run: the settings, narrowed by a
// request, and how far the run goes.
type params struct {
	trigger, cause string
	run            execute.Settings
	mode           string
	confirm        string
	// root is the pvc root an S3 notification touched ("" otherwise).
	root string
}

// params are the settings' defaults for a run: a tick deletes only when
// the deployment carries a confirmation word.
func (s Settings) params(trigger, cause string) (params, error) {
	p := params{trigger: trigger, cause: cause, run: s.Settings, mode: modePlan}
	if trigger == events.PruneTriggerTick && s.Confirm != "" {
		if err := s.checkConfirm(); err != nil {
			return p, err
		}
		p.mode, p.confirm = modeDelete, s.Confirm
	}
	return p, nil
}

// checkConfirm reports whether the deployment's word fits its own flags.
// The message does not repeat the word: it reaches whoever sent the event.
func (s Settings) checkConfirm() error {
	if engine.CheckConfirmation(engine.Options{IncludeRetained: s.IncludeRetained, DeleteRepositoryStray: s.DeleteRepositoryStray}, s.Confirm) != nil {
		return fmt.Errorf("%sCONFIRM does not match the word these settings need (it depends on %sINCLUDE_RETAINED and %sDELETE_REPOSITORY_STRAY; see snapflow prune prune --help)", envPrefix, envPrefix, envPrefix)
	}
	return nil
}

// request merges a prune requested event over the settings. A request
// may only narrow what the deployment would do on a tick: a smaller
// namespace or prefix, a longer minimum age, fewer kinds of candidates. It
// cannot pick another repo for a live run, lower the age gate, add
// retained or stray data, purge versions, or confirm: a live run needs the
// deployment's own word. Every error is the sender's (events.ErrMalformed):
// a redelivery cannot fix it.
func (s Settings) request(req events.PruneRequest, cause string) (params, error) {
	p, err := s.params(events.PruneTriggerRequest, cause)
	if err != nil {
		return p, err
	}
	if req.Confirm != "" {
		return p, events.Malformed("prune requested: confirm is not accepted in events; a live prune is confirmed by the deployment (%sCONFIRM, the chart's prune.confirm), never by a request", envPrefix)
	}
	if req.BackupRepo != "" {
		if s.BackupRepo != "" && req.BackupRepo != s.BackupRepo {
			return p, events.Malformed("this prune function serves BackupRepo %s, not %s", s.BackupRepo, req.BackupRepo)
		}
		p.run.BackupRepo = req.BackupRepo
	}
	if p.run.BackupRepo == "" {
		return p, events.Malformed("prune requested data needs backupRepo: this function has no default BackupRepo")
	}
	if req.Namespace != "" {
		if s.Namespace != "" && req.Namespace != s.Namespace {
			return p, events.Malformed("prune requested namespace %q: this function prunes namespace %q only; a request may narrow the scope, not move it", req.Namespace, s.Namespace)
		}
		p.run.Namespace = req.Namespace
	}
	if req.Prefix != "" {
		// By whole segments, after resolving "..": the engine scopes its
		// scan that way, so "tenant-a/../tenant-b" or "tenant-ab" must not
		// pass for "tenant-a".
		k, ok := engine.NormalizeKey(req.Prefix)
		if !ok {
			return p, events.Malformed("prune requested prefix %q: it climbs above the bucket", req.Prefix)
		}
		if !engine.Contains(engine.CleanKey(s.Prefix), k) {
			return p, events.Malformed("prune requested prefix %q: it must lie under this function's prefix %q, by whole path segments", req.Prefix, s.Prefix)
		}
		p.run.Prefix = k
	}
	if req.MinAge != "" {
		d, err := time.ParseDuration(req.MinAge)
		if err != nil {
			return p, events.Malformed("prune requested minAge %q: want a Go duration such as 168h", req.MinAge)
		}
		if floor := s.EffectiveMinAge(); d < floor {
			return p, events.Malformed("prune requested minAge %s: a request may raise the age gate, not lower it below this function's %s", d, floor)
		}
		p.run.MinAge, p.run.DisableMinAge = d, d == 0
	}
	for _, b := range []struct {
		field string
		v     *bool
		dst   *bool
	}{{"includeRetained", req.IncludeRetained, &p.run.IncludeRetained}, {"deleteRepositoryStray", req.DeleteRepositoryStray, &p.run.DeleteRepositoryStray}, {"purgeVersions", req.PurgeVersions, &p.run.PurgeVersions}} {
		if b.v == nil {
			continue
		}
		if *b.v && !*b.dst {
			return p, events.Malformed("prune requested %s true: this function runs with it off, and a request may not widen what it deletes", b.field)
		}
		*b.dst = *b.v
	}
	if req.BucketVersioning != "" && req.BucketVersioning != p.run.BucketVersioning {
		return p, events.Malformed("prune requested bucketVersioning %q: this function is set to %q; change it in the deployment, not per request", req.BucketVersioning, p.run.BucketVersioning)
	}
	p.mode, p.confirm = modeDryRun, ""
	if req.DryRun != nil && !*req.DryRun {
		switch {
		case s.Confirm == "":
			return p, events.Malformed("prune requested with dryRun false: this deployment is not configured for live prunes (set %sCONFIRM, the chart's prune.confirm); requests can only plan and dry-run", envPrefix)
		case s.BackupRepo == "":
			return p, events.Malformed("prune requested with dryRun false: a live prune needs the deployment's own BackupRepo (%sBACKUP_REPO)", envPrefix)
		}
		if err := s.checkConfirm(); err != nil {
			return p, err
		}
		// The deployment confirmed its own scope; a narrower one is covered.
		p.mode, p.confirm = modeDelete, engine.ConfirmationWord(p.run.IncludeRetained, p.run.DeleteRepositoryStray)
	}
	if err := p.run.Validate(requestField); err != nil {
		return p, events.Malformed("prune requested: %v", err)
	}
	return p, nil
}

// requestField names a setting as a prune requested event carries it;
// what no event may set is named as the deployment's variable.
func requestField(flag string) string {
	switch flag {
	case "backup-repo":
		return "backupRepo"
	case "min-age":
		return "minAge"
	case "bucket-versioning":
		return "bucketVersioning"
	case "namespace", "prefix":
		return flag
	}
	return execute.EnvName(flag)
}
