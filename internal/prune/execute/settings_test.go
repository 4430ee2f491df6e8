package execute

import (
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/prune"
)

// One Validate serves the CLI and the function: each refusal names the
// setting as the operator wrote it, a flag or a variable.
func TestSettingsValidate(t *testing.T) {
	ok := Settings{BackupRepo: "repo"}
	tests := []struct {
		name    string
		mutate  func(*Settings)
		setting string // the flag named by the refusal; "" when valid
	}{
		{"the zero value with a repo", func(*Settings) {}, ""},
		{"every field set", func(s *Settings) {
			*s = Settings{BackupRepo: "repo", Namespace: "app", Prefix: "kb/app", MinAge: time.Hour, ManifestName: "m.json",
				BucketVersioning: "enabled", Endpoint: "https://s3.example.test", Concurrency: 8, Timeout: time.Hour}
		}, ""},
		{"no repo", func(s *Settings) { s.BackupRepo = " " }, "backup-repo"},
		{"namespace not a label", func(s *Settings) { s.Namespace = "Not_A_Label" }, "namespace"},
		{"manifest name with a slash", func(s *Settings) { s.ManifestName = "a/b" }, "manifest-name"},
		{"negative min age", func(s *Settings) { s.MinAge = -time.Hour }, "min-age"},
		{"negative concurrency", func(s *Settings) { s.Concurrency = -1 }, "concurrency"},
		{"negative timeout", func(s *Settings) { s.Timeout = -time.Second }, "timeout"},
		{"unknown versioning", func(s *Settings) { s.BucketVersioning = "sometimes" }, "bucket-versioning"},
		{"a prefix above the bucket", func(s *Settings) { s.Prefix = "../x" }, "prefix"},
		{"an endpoint that is no URL", func(s *Settings) { s.Endpoint = "ftp://x" }, "endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ok
			tt.mutate(&s)
			for _, name := range []Namer{FlagName, EnvName} {
				err := s.Validate(name)
				switch {
				case tt.setting == "" && err != nil:
					t.Fatalf("refused: %v", err)
				case tt.setting != "" && (err == nil || !strings.Contains(err.Error(), name(tt.setting))):
					t.Fatalf("err = %v, want one naming %s", err, name(tt.setting))
				case tt.setting != "" && (strings.Count(err.Error(), name(tt.setting)) != 1 || name(tt.setting) != FlagName(tt.setting) && strings.Contains(err.Error(), FlagName(tt.setting))):
					t.Fatalf("err = %v, want the setting named once, as %s", err, name(tt.setting))
				}
			}
		})
	}
}

func TestSettingsDefaults(t *testing.T) {
	var zero Settings
	if zero.EffectiveConcurrency() != DefaultConcurrency || zero.EffectiveTimeout() != DefaultTimeout || zero.EffectiveMinAge() != prune.DefaultMinAge {
		t.Fatalf("zero settings: concurrency %d, timeout %s, min age %s", zero.EffectiveConcurrency(), zero.EffectiveTimeout(), zero.EffectiveMinAge())
	}
	if m, err := zero.Versioning(FlagName); err != nil || m != prune.ModeAuto {
		t.Fatalf("zero versioning = %q, %v", m, err)
	}
	if !zero.S3Flags().UseRepoCredentials {
		t.Fatal("the zero settings do not read the BackupRepo's credentials")
	}
	off := Settings{MinAge: time.Hour, DisableMinAge: true}
	if off.EffectiveMinAge() != 0 || !off.Options().DisableMinAge {
		t.Fatal("DisableMinAge does not turn the age gate off")
	}
}

func TestFromEnvNamesEveryFlag(t *testing.T) {
	env := map[string]string{
		"KBBACKUP_PRUNE_BACKUP_REPO": "repo", "KBBACKUP_PRUNE_NAMESPACE": "app", "KBBACKUP_PRUNE_PREFIX": "kb",
		"KBBACKUP_PRUNE_MANIFEST_NAME": "m.json", "KBBACKUP_PRUNE_BUCKET_VERSIONING": "disabled",
		"KBBACKUP_PRUNE_BUCKET": "b", "KBBACKUP_PRUNE_ENDPOINT": "http://s3", "KBBACKUP_PRUNE_REGION": "r", "KBBACKUP_PRUNE_CA_FILE": "/ca.pem",
		"KBBACKUP_PRUNE_INCLUDE_RETAINED": "true", "KBBACKUP_PRUNE_DELETE_REPOSITORY_STRAY": "true", "KBBACKUP_PRUNE_PURGE_VERSIONS": "true",
		"KBBACKUP_PRUNE_PATH_STYLE": "true", "KBBACKUP_PRUNE_INSECURE_SKIP_TLS_VERIFY": "true", "KBBACKUP_PRUNE_USE_BACKUP_REPO_CREDENTIALS": "false",
		"KBBACKUP_PRUNE_MIN_AGE": "0", "KBBACKUP_PRUNE_CONCURRENCY": "2", "KBBACKUP_PRUNE_TIMEOUT": "1h",
	}
	s, err := FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{BackupRepo: "repo", Namespace: "app", Prefix: "kb", ManifestName: "m.json", BucketVersioning: "disabled",
		Bucket: "b", Endpoint: "http://s3", Region: "r", CAFile: "/ca.pem", IncludeRetained: true, DeleteRepositoryStray: true, PurgeVersions: true,
		PathStyle: true, InsecureSkipTLSVerify: true, DefaultCredentialChain: true, DisableMinAge: true, Concurrency: 2, Timeout: time.Hour}
	if s != want {
		t.Fatalf("got  %+v\nwant %+v", s, want)
	}
	for k, v := range map[string]string{"KBBACKUP_PRUNE_TIMEOUT": "0s", "KBBACKUP_PRUNE_CONCURRENCY": "0", "KBBACKUP_PRUNE_PATH_STYLE": "maybe"} {
		if _, err := FromEnv(func(name string) string {
			if name == k {
				return v
			}
			return ""
		}); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: err = %v, want one naming the variable", k, v, err)
		}
	}
}
