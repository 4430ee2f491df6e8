package execute

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/kubeinv"
	"github.com/snapflow/snapflow/internal/prune/s3store"
)

// Settings are what an operator sets for prune runs: the flags of
// `snapflow prune` and the KBBACKUP_PRUNE_* variables of the prune
// function fill this one struct and are checked by one Validate. The zero
// value is the CLI's defaults with no repo: a zero MinAge, Concurrency or
// Timeout means the default, and the input layers (flags, environment)
// refuse an explicit zero where it would mean something else.
type Settings struct {
	BackupRepo, Namespace, Prefix string
	// MinAge is the age gate (zero: prune.DefaultMinAge unless
	// DisableMinAge, which is --min-age=0).
	MinAge        time.Duration
	DisableMinAge bool
	// ManifestName is the backup manifest's file name (empty: the default).
	ManifestName string

	IncludeRetained, DeleteRepositoryStray, PurgeVersions bool
	// BucketVersioning is auto (also when empty), disabled, enabled or
	// suspended.
	BucketVersioning string

	Bucket, Endpoint, Region string
	PathStyle                bool
	CAFile                   string
	InsecureSkipTLSVerify    bool
	// DefaultCredentialChain is --use-backup-repo-credentials=false: the
	// AWS default chain instead of the BackupRepo's Secret.
	DefaultCredentialChain bool

	// Concurrency bounds candidates processed at once (zero: 4); Timeout
	// bounds one run (zero: 30m).
	Concurrency int
	Timeout     time.Duration
}

// Defaults of the zero Settings, as the CLI's flags show them.
const (
	DefaultConcurrency = 4
	DefaultTimeout     = 30 * time.Minute
)

// Namer turns a setting's flag name (min-age) into the name the operator
// used: --min-age for the CLI, KBBACKUP_PRUNE_MIN_AGE for the function.
type Namer func(flag string) string

// FlagName names a setting as `snapflow prune` takes it.
func FlagName(flag string) string { return "--" + flag }

// EnvPrefix starts every variable FromEnv reads.
const EnvPrefix = "KBBACKUP_PRUNE_"

// EnvName names a setting as the prune function takes it.
func EnvName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Options are the planner's options.
func (s Settings) Options() prune.Options {
	return prune.Options{Namespace: s.Namespace, Prefix: s.Prefix, ManifestName: s.ManifestName,
		MinAge: s.MinAge, DisableMinAge: s.DisableMinAge,
		IncludeRetained: s.IncludeRetained, DeleteRepositoryStray: s.DeleteRepositoryStray, PurgeVersions: s.PurgeVersions}
}

// S3Flags are the S3 overrides in the form kubeinv resolves.
func (s Settings) S3Flags() kubeinv.S3Flags {
	return kubeinv.S3Flags{Bucket: s.Bucket, Endpoint: s.Endpoint, Region: s.Region, PathStyle: s.PathStyle,
		CAFile: s.CAFile, InsecureSkipTLSVerify: s.InsecureSkipTLSVerify, UseRepoCredentials: !s.DefaultCredentialChain}
}

// EffectiveConcurrency is Concurrency with its default.
func (s Settings) EffectiveConcurrency() int {
	if s.Concurrency <= 0 {
		return DefaultConcurrency
	}
	return s.Concurrency
}

// EffectiveTimeout is Timeout with its default.
func (s Settings) EffectiveTimeout() time.Duration {
	if s.Timeout <= 0 {
		return DefaultTimeout
	}
	return s.Timeout
}

// EffectiveMinAge is the age gate a run applies.
func (s Settings) EffectiveMinAge() time.Duration {
	switch {
	case s.DisableMinAge:
		return 0
	case s.MinAge > 0:
		return s.MinAge
	}
	return prune.DefaultMinAge
}

// Validate checks the settings before any network access; errors name the
// setting as the operator wrote it.
func (s Settings) Validate(name Namer) error {
	_, err := s.Versioning(name)
	switch {
	case strings.TrimSpace(s.BackupRepo) == "":
		return fmt.Errorf("no BackupRepo: set %s to the KubeBlocks BackupRepo whose bucket is pruned", name("backup-repo"))
	case s.Namespace != "" && !prune.IsDNSLabel(s.Namespace):
		return fmt.Errorf("invalid %s %q: must be a DNS-1123 label", name("namespace"), s.Namespace)
	case strings.Contains(s.ManifestName, "/"):
		return fmt.Errorf("invalid %s %q: must be a bare file name", name("manifest-name"), s.ManifestName)
	case s.MinAge < 0:
		return fmt.Errorf("invalid %s %s: must be >= 0", name("min-age"), s.MinAge)
	case s.Concurrency < 0:
		return fmt.Errorf("invalid %s %d: must be >= 1", name("concurrency"), s.Concurrency)
	case s.Timeout < 0:
		return fmt.Errorf("invalid %s %s: must be > 0", name("timeout"), s.Timeout)
	case err != nil:
		return err
	}
	if _, ok := prune.NormalizeKey(s.Prefix); !ok {
		return fmt.Errorf("invalid %s %q: it climbs above the bucket", name("prefix"), s.Prefix)
	}
	if s.Endpoint != "" {
		if err := s3store.ValidateEndpoint(s.Endpoint); err != nil {
			return fmt.Errorf("invalid %s: %w", name("endpoint"), err)
		}
	}
	return nil
}

// Versioning is the parsed BucketVersioning (empty: auto).
func (s Settings) Versioning(name Namer) (prune.VersioningMode, error) {
	m, err := prune.ParseVersioningMode(s.BucketVersioning)
	if err != nil {
		// The parser's message names the flag; a variable or a request
		// field is named as the operator wrote it.
		return m, fmt.Errorf("invalid %s %q: want auto, disabled, enabled or suspended", name("bucket-versioning"), s.BucketVersioning)
	}
	return m, nil
}

// FromEnv reads Settings from KBBACKUP_PRUNE_<FLAG> variables (for
// example KBBACKUP_PRUNE_BACKUP_REPO, _MIN_AGE, _PATH_STYLE); the region
// falls back to AWS_REGION and AWS_DEFAULT_REGION as the CLI's does. An
// empty variable counts as unset. It parses; Validate checks.
func FromEnv(getenv func(string) string) (Settings, error) {
	get := func(flag string) string { return strings.TrimSpace(getenv(EnvName(flag))) }
	s := Settings{
		BackupRepo: get("backup-repo"), Namespace: get("namespace"), Prefix: get("prefix"),
		ManifestName: get("manifest-name"), BucketVersioning: get("bucket-versioning"),
		Bucket: get("bucket"), Endpoint: get("endpoint"), Region: get("region"), CAFile: get("ca-file"),
	}
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION"} {
		if s.Region == "" {
			s.Region = strings.TrimSpace(getenv(k))
		}
	}
	var errs []error
	boolean := func(flag string, dst *bool, invert bool) {
		if v := get(flag); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: want true or false", EnvName(flag), v))
				return
			}
			*dst = b != invert
		}
	}
	duration := func(flag string, dst *time.Duration) {
		if v := get(flag); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: want a Go duration such as 168h: %w", EnvName(flag), v, err))
				return
			}
			*dst = d
		}
	}
	boolean("include-retained", &s.IncludeRetained, false)
	boolean("delete-repository-stray", &s.DeleteRepositoryStray, false)
	boolean("purge-versions", &s.PurgeVersions, false)
	boolean("path-style", &s.PathStyle, false)
	boolean("insecure-skip-tls-verify", &s.InsecureSkipTLSVerify, false)
	boolean("use-backup-repo-credentials", &s.DefaultCredentialChain, true)
	duration("min-age", &s.MinAge)
	s.DisableMinAge = get("min-age") != "" && s.MinAge == 0
	duration("timeout", &s.Timeout)
	if v := get("timeout"); v != "" && s.Timeout == 0 {
		errs = append(errs, fmt.Errorf("%s=%q: want a duration > 0", EnvName("timeout"), v))
	}
	if v := get("concurrency"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("%s=%q: want an integer >= 1", EnvName("concurrency"), v))
		}
		s.Concurrency = n
	}
	return s, errors.Join(errs...)
}
