package prune

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/snapflow/snapflow/events"
	engine "github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/kubeinv"
)

// Settings configure one deployment of the prune function: the BackupRepo
// it serves, the confirmation word that lets ticks delete, and the defaults
// of the `snapflow prune` flags. The zero value is the CLI's defaults with
// no repo and no word (plan only).
type Settings struct {
	// BackupRepo is the repo ticks and S3 notifications work on. Without
	// one, ticks and notifications do nothing and requests must name a
	// repo.
	BackupRepo string
	// Confirm is the confirmation word (DELETE, DELETE-STRAY, ...): with it
	// a tick, and a request with dryRun false, deletes what the plan finds
	// eligible; empty, the deployment only plans and dry-runs. Events never
	// carry a word of their own: whoever can send one must not be able to
	// authorise a deletion.
	Confirm string

	Namespace, Prefix string
	// MinAge is --min-age (zero: the 168h default unless DisableMinAge).
	MinAge        time.Duration
	DisableMinAge bool
	ManifestName  string

	IncludeRetained, DeleteRepositoryStray, PurgeVersions bool
	// BucketVersioning is auto (the default), disabled, enabled or suspended.
	BucketVersioning string

	Bucket, Endpoint, Region string
	PathStyle                bool
	CAFile                   string
	InsecureSkipTLSVerify    bool
	// DefaultCredentialChain is --use-backup-repo-credentials=false.
	DefaultCredentialChain bool
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

	// Concurrency is --concurrency (0: 4); Timeout bounds one run (0: 30m).
	Concurrency int
	Timeout     time.Duration
}

// Environment variables of FromEnv: KBBACKUP_PRUNE_ and the flag name,
// which extends the CLI's six KBBACKUP_PRUNE_ variables to every flag.
const envPrefix = "KBBACKUP_PRUNE_"

// FromEnv reads Settings from KBBACKUP_PRUNE_<FLAG> variables (for
// example KBBACKUP_PRUNE_BACKUP_REPO, _CONFIRM, _MIN_AGE, _PATH_STYLE);
// the region falls back to AWS_REGION and AWS_DEFAULT_REGION as the
// CLI's does. An empty variable counts as unset.
func FromEnv(getenv func(string) string) (Settings, error) {
	get := func(name string) string { return strings.TrimSpace(getenv(envPrefix + name)) }
	s := Settings{
		BackupRepo: get("BACKUP_REPO"), Confirm: get("CONFIRM"), Namespace: get("NAMESPACE"), Prefix: get("PREFIX"),
		ManifestName: get("MANIFEST_NAME"), BucketVersioning: get("BUCKET_VERSIONING"),
		Bucket: get("BUCKET"), Endpoint: get("ENDPOINT"), Region: get("REGION"), CAFile: get("CA_FILE"),
	}
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION"} {
		if s.Region == "" {
			s.Region = strings.TrimSpace(getenv(k))
		}
	}
	var errs []error
	boolean := func(name string, dst *bool, invert bool) {
		if v := get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s%s=%q: want true or false", envPrefix, name, v))
				return
			}
			*dst = b != invert
		}
	}
	duration := func(name string, dst *time.Duration) {
		if v := get(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s%s=%q: want a Go duration such as 168h: %w", envPrefix, name, v, err))
				return
			}
			*dst = d
		}
	}
	boolean("INCLUDE_RETAINED", &s.IncludeRetained, false)
	boolean("DELETE_REPOSITORY_STRAY", &s.DeleteRepositoryStray, false)
	boolean("PURGE_VERSIONS", &s.PurgeVersions, false)
	boolean("PATH_STYLE", &s.PathStyle, false)
	boolean("INSECURE_SKIP_TLS_VERIFY", &s.InsecureSkipTLSVerify, false)
	boolean("USE_BACKUP_REPO_CREDENTIALS", &s.DefaultCredentialChain, true)
	boolean("SNS_VERIFY", &s.SkipSNSVerify, true)
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
	duration("SNS_MAX_AGE", &s.SNSMaxAge)
	duration("MIN_AGE", &s.MinAge)
	s.DisableMinAge = get("MIN_AGE") != "" && s.MinAge == 0
	duration("TIMEOUT", &s.Timeout)
	if v := get("CONCURRENCY"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("%sCONCURRENCY=%q: want an integer >= 1", envPrefix, v))
		}
		s.Concurrency = n
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
	p, err := s.params(events.PruneTriggerTick, "")
	if err != nil {
		return err
	}
	if s.BackupRepo == "" {
		p.repo = "-" // a repo is only required once an event needs one
	}
	if s.Timeout < 0 {
		return errors.New("invalid timeout: must be > 0")
	}
	return p.validate()
}

// Run modes, as `snapflow prune` prints them.
const (
	modePlan   = "plan"
	modeDryRun = "dry-run"
	modeDelete = "delete"
)

// params are the parameters of one run: the CLI's flags after defaults.
type params struct {
	trigger, cause string
	repo           string
	opts           engine.Options
	versioning     string
	mode           string
	confirm        string
	concurrency    int
	// root is the pvc root an S3 notification touched ("" otherwise).
	root string
}

// params are the settings' defaults for a run: a tick deletes only when
// the deployment carries a confirmation word.
func (s Settings) params(trigger, cause string) (params, error) {
	p := params{
		trigger: trigger, cause: cause, repo: s.BackupRepo, versioning: s.BucketVersioning, mode: modePlan, concurrency: s.Concurrency,
		opts: engine.Options{Namespace: s.Namespace, Prefix: s.Prefix, ManifestName: s.ManifestName, MinAge: s.MinAge,
			DisableMinAge: s.DisableMinAge, IncludeRetained: s.IncludeRetained, DeleteRepositoryStray: s.DeleteRepositoryStray,
			PurgeVersions: s.PurgeVersions},
	}
	if p.concurrency == 0 {
		p.concurrency = 4
	}
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
		p.repo = req.BackupRepo
	}
	if p.repo == "" {
		return p, events.Malformed("prune requested data needs backupRepo: this function has no default BackupRepo")
	}
	if req.Namespace != "" {
		if s.Namespace != "" && req.Namespace != s.Namespace {
			return p, events.Malformed("prune requested namespace %q: this function prunes namespace %q only; a request may narrow the scope, not move it", req.Namespace, s.Namespace)
		}
		p.opts.Namespace = req.Namespace
	}
	if req.Prefix != "" {
		if !strings.HasPrefix(req.Prefix, s.Prefix) {
			return p, events.Malformed("prune requested prefix %q: it must lie under this function's prefix %q", req.Prefix, s.Prefix)
		}
		p.opts.Prefix = req.Prefix
	}
	if req.MinAge != "" {
		d, err := time.ParseDuration(req.MinAge)
		if err != nil {
			return p, events.Malformed("prune requested minAge %q: want a Go duration such as 168h", req.MinAge)
		}
		if floor := s.minAge(); d < floor {
			return p, events.Malformed("prune requested minAge %s: a request may raise the age gate, not lower it below this function's %s", d, floor)
		}
		p.opts.MinAge, p.opts.DisableMinAge = d, d == 0
	}
	for _, b := range []struct {
		field string
		v     *bool
		dst   *bool
	}{{"includeRetained", req.IncludeRetained, &p.opts.IncludeRetained}, {"deleteRepositoryStray", req.DeleteRepositoryStray, &p.opts.DeleteRepositoryStray}, {"purgeVersions", req.PurgeVersions, &p.opts.PurgeVersions}} {
		if b.v == nil {
			continue
		}
		if *b.v && !*b.dst {
			return p, events.Malformed("prune requested %s true: this function runs with it off, and a request may not widen what it deletes", b.field)
		}
		*b.dst = *b.v
	}
	if req.BucketVersioning != "" && req.BucketVersioning != p.versioning {
		return p, events.Malformed("prune requested bucketVersioning %q: this function is set to %q; change it in the deployment, not per request", req.BucketVersioning, p.versioning)
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
		p.mode, p.confirm = modeDelete, engine.ConfirmationWord(p.opts.IncludeRetained, p.opts.DeleteRepositoryStray)
	}
	if err := p.validate(); err != nil {
		return p, events.Malformed("prune requested: %v", err)
	}
	return p, nil
}

// minAge is the age gate the deployment runs with.
func (s Settings) minAge() time.Duration {
	switch {
	case s.DisableMinAge:
		return 0
	case s.MinAge > 0:
		return s.MinAge
	}
	return engine.DefaultMinAge
}

// validate checks what `snapflow prune` checks before any network access.
func (p params) validate() error {
	switch {
	case strings.TrimSpace(p.repo) == "":
		return errors.New("no BackupRepo: set " + envPrefix + "BACKUP_REPO")
	case p.opts.Namespace != "" && !engine.IsDNSLabel(p.opts.Namespace):
		return fmt.Errorf("invalid namespace %q: must be a DNS-1123 label", p.opts.Namespace)
	case strings.Contains(p.opts.ManifestName, "/"):
		return fmt.Errorf("invalid manifest name %q: must be a bare file name", p.opts.ManifestName)
	case p.opts.MinAge < 0:
		return errors.New("invalid min age: must be >= 0")
	case p.concurrency < 1:
		return errors.New("invalid concurrency: must be >= 1")
	}
	if _, ok := engine.NormalizeKey(p.opts.Prefix); !ok {
		return fmt.Errorf("invalid prefix %q: it climbs above the bucket", p.opts.Prefix)
	}
	if _, err := engine.ParseVersioningMode(p.versioning); err != nil {
		return err
	}
	return nil
}

// s3Flags are the settings' S3 overrides in the form kubeinv resolves.
func (s Settings) s3Flags() kubeinv.S3Flags {
	return kubeinv.S3Flags{Bucket: s.Bucket, Endpoint: s.Endpoint, Region: s.Region, PathStyle: s.PathStyle,
		CAFile: s.CAFile, InsecureSkipTLSVerify: s.InsecureSkipTLSVerify, UseRepoCredentials: !s.DefaultCredentialChain}
}

func (s Settings) timeout() time.Duration {
	if s.Timeout <= 0 {
		return 30 * time.Minute
	}
	return s.Timeout
}
