package prune

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/snapflow/snapflow/events"
	engine "github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/execute"
	"github.com/snapflow/snapflow/internal/prune/kubeinv"
)

const root = "pvc-0a3c1a2e-6d2b-4f47-9b7e-2f7f8a1f0c11"

func ptr[T any](v T) *T { return &v }

func TestRequestParams(t *testing.T) {
	base := Settings{Settings: execute.Settings{BackupRepo: "repo", Namespace: "app", MinAge: time.Hour, IncludeRetained: true}}
	tests := []struct {
		name     string
		settings Settings
		req      events.PruneRequest
		check    func(t *testing.T, p params)
		refused  string
	}{
		{name: "defaults are a dry run with the settings", settings: base, check: func(t *testing.T, p params) {
			if p.mode != modeDryRun || p.run.BackupRepo != "repo" || p.run.Namespace != "app" || p.run.MinAge != time.Hour || !p.run.IncludeRetained || p.run.EffectiveConcurrency() != 4 {
				t.Fatalf("%+v", p)
			}
		}},
		{name: "a request narrows the scope", settings: Settings{Settings: execute.Settings{BackupRepo: "repo", MinAge: time.Hour, IncludeRetained: true, DeleteRepositoryStray: true, PurgeVersions: true}},
			req: events.PruneRequest{Namespace: "other", Prefix: root, MinAge: "200h", IncludeRetained: ptr(false), DeleteRepositoryStray: ptr(false), PurgeVersions: ptr(false)},
			check: func(t *testing.T, p params) {
				o := p.run.Options()
				if o.Namespace != "other" || o.Prefix != root || o.MinAge != 200*time.Hour || o.DisableMinAge || o.IncludeRetained || o.DeleteRepositoryStray || o.PurgeVersions {
					t.Fatalf("%+v", p)
				}
			}},
		{name: "a live run uses the deployment's word", settings: Settings{Settings: execute.Settings{BackupRepo: "repo"}, Confirm: "DELETE"}, req: events.PruneRequest{DryRun: ptr(false)},
			check: func(t *testing.T, p params) {
				if p.mode != modeDelete || p.run.BackupRepo != "repo" || p.confirm != "DELETE" {
					t.Fatalf("%+v", p)
				}
			}},
		{name: "a narrowed live run needs only the narrower word", settings: Settings{Settings: execute.Settings{BackupRepo: "repo", IncludeRetained: true}, Confirm: "DELETE-RETAINED"},
			req: events.PruneRequest{DryRun: ptr(false), IncludeRetained: ptr(false)},
			check: func(t *testing.T, p params) {
				if p.mode != modeDelete || p.confirm != "DELETE" || p.run.IncludeRetained {
					t.Fatalf("%+v", p)
				}
			}},
		{name: "an event cannot confirm", settings: Settings{}, req: events.PruneRequest{BackupRepo: "r2", DryRun: ptr(false), Confirm: "DELETE"}, refused: "not accepted in events"},
		{name: "an event cannot confirm even the deployment's word", settings: Settings{Settings: execute.Settings{BackupRepo: "repo"}, Confirm: "DELETE"}, req: events.PruneRequest{DryRun: ptr(false), Confirm: "DELETE"}, refused: "not accepted in events"},
		{name: "no live run on an unconfirmed deployment", settings: base, req: events.PruneRequest{DryRun: ptr(false)}, refused: "not configured for live prunes"},
		{name: "no live run on a repo the event picked", settings: Settings{Confirm: "DELETE"}, req: events.PruneRequest{BackupRepo: "r2", DryRun: ptr(false)}, refused: "deployment's own BackupRepo"},
		{name: "minAge cannot go lower", settings: base, req: events.PruneRequest{MinAge: "0"}, refused: "may raise the age gate, not lower it"},
		{name: "minAge cannot go below the default", settings: Settings{Settings: execute.Settings{BackupRepo: "repo"}}, req: events.PruneRequest{MinAge: "1h"}, refused: "not lower it below this function's 168h0m0s"},
		{name: "includeRetained cannot be added", settings: Settings{Settings: execute.Settings{BackupRepo: "repo"}}, req: events.PruneRequest{IncludeRetained: ptr(true)}, refused: "includeRetained true"},
		{name: "stray data cannot be added", settings: base, req: events.PruneRequest{DeleteRepositoryStray: ptr(true)}, refused: "deleteRepositoryStray true"},
		{name: "versions cannot be purged", settings: base, req: events.PruneRequest{PurgeVersions: ptr(true)}, refused: "purgeVersions true"},
		{name: "versioning is the deployment's", settings: base, req: events.PruneRequest{BucketVersioning: "enabled"}, refused: "bucketVersioning"},
		{name: "the namespace cannot move", settings: base, req: events.PruneRequest{Namespace: "other"}, refused: "narrow the scope, not move it"},
		{name: "the prefix cannot climb out", settings: Settings{Settings: execute.Settings{BackupRepo: "repo", Prefix: "tenant-a/"}}, req: events.PruneRequest{Prefix: "tenant-b/"}, refused: "must lie under"},
		{name: "the prefix cannot climb out through ..", settings: Settings{Settings: execute.Settings{BackupRepo: "repo", Prefix: "tenant-a"}}, req: events.PruneRequest{Prefix: "tenant-a/../tenant-b"}, refused: "must lie under"},
		{name: "the prefix cannot climb above the bucket", settings: Settings{Settings: execute.Settings{BackupRepo: "repo", Prefix: "tenant-a"}}, req: events.PruneRequest{Prefix: "tenant-a/../../x"}, refused: "climbs above"},
		{name: "a sibling sharing the name's start is outside", settings: Settings{Settings: execute.Settings{BackupRepo: "repo", Prefix: "tenant-a"}}, req: events.PruneRequest{Prefix: "tenant-ab/x"}, refused: "must lie under"},
		{name: "a prefix inside is taken in normal form", settings: Settings{Settings: execute.Settings{BackupRepo: "repo", Prefix: "tenant-a/"}}, req: events.PruneRequest{Prefix: "/tenant-a//app/"},
			check: func(t *testing.T, p params) {
				if p.run.Prefix != "tenant-a/app" {
					t.Fatalf("prefix %q, want tenant-a/app", p.run.Prefix)
				}
			}},
		{name: "no repo", settings: Settings{}, refused: "needs backupRepo"},
		{name: "another repo", settings: base, req: events.PruneRequest{BackupRepo: "x"}, refused: "serves BackupRepo repo, not x"},
		{name: "bad min age", settings: base, req: events.PruneRequest{MinAge: "7d"}, refused: "minAge"},
		{name: "bad namespace", settings: Settings{Settings: execute.Settings{BackupRepo: "repo"}}, req: events.PruneRequest{Namespace: "Not_A_Label"}, refused: "DNS-1123"},
		{name: "prefix above the bucket", settings: base, req: events.PruneRequest{Prefix: "../x"}, refused: "climbs above"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.settings.request(tt.req, "src#1")
			if tt.refused != "" {
				if !events.IsClientError(err) || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("err = %v, want a client error containing %q", err, tt.refused)
				}
				// A refusal reaches the sender: it must not teach the word.
				if strings.Contains(err.Error(), `"DELETE`) || strings.Contains(err.Error(), " DELETE") {
					t.Fatalf("refusal %q names a confirmation word", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.trigger != events.PruneTriggerRequest || p.cause != "src#1" {
				t.Fatalf("trigger %q cause %q", p.trigger, p.cause)
			}
			tt.check(t, p)
		})
	}
}

func TestTickParams(t *testing.T) {
	tests := []struct {
		name     string
		settings Settings
		mode     string
		bad      bool
	}{
		{"no word plans", Settings{Settings: execute.Settings{BackupRepo: "r"}}, modePlan, false},
		{"the word deletes", Settings{Settings: execute.Settings{BackupRepo: "r"}, Confirm: "DELETE"}, modeDelete, false},
		{"stray needs its word", Settings{Settings: execute.Settings{BackupRepo: "r", DeleteRepositoryStray: true}, Confirm: "DELETE-STRAY"}, modeDelete, false},
		{"a wrong word is a configuration error", Settings{Settings: execute.Settings{BackupRepo: "r", IncludeRetained: true}, Confirm: "DELETE"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.settings.params(events.PruneTriggerTick, "c")
			if tt.bad {
				if err == nil || events.IsClientError(err) || !strings.Contains(err.Error(), "CONFIRM does not match") || strings.Contains(err.Error(), "DELETE-RETAINED") {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil || p.mode != tt.mode {
				t.Fatalf("mode %q err %v", p.mode, err)
			}
		})
	}
}

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		check func(t *testing.T, s Settings)
		bad   string
	}{
		{name: "every variable", env: map[string]string{
			"KBBACKUP_PRUNE_BACKUP_REPO": "repo", "KBBACKUP_PRUNE_CONFIRM": "DELETE-STRAY", "KBBACKUP_PRUNE_DELETE_REPOSITORY_STRAY": "true",
			"KBBACKUP_PRUNE_NAMESPACE": "app", "KBBACKUP_PRUNE_PREFIX": root, "KBBACKUP_PRUNE_MIN_AGE": "48h", "KBBACKUP_PRUNE_PATH_STYLE": "true",
			"KBBACKUP_PRUNE_USE_BACKUP_REPO_CREDENTIALS": "false", "KBBACKUP_PRUNE_CONCURRENCY": "8", "KBBACKUP_PRUNE_TIMEOUT": "2h",
			"KBBACKUP_PRUNE_BUCKET_VERSIONING": "disabled", "AWS_REGION": "eu-west-1",
		}, check: func(t *testing.T, s Settings) {
			want := Settings{Settings: execute.Settings{BackupRepo: "repo", DeleteRepositoryStray: true, Namespace: "app", Prefix: root, MinAge: 48 * time.Hour,
				PathStyle: true, DefaultCredentialChain: true, Concurrency: 8, Timeout: 2 * time.Hour, BucketVersioning: "disabled", Region: "eu-west-1"}, Confirm: "DELETE-STRAY"}
			if !reflect.DeepEqual(s, want) {
				t.Fatalf("got  %+v\nwant %+v", s, want)
			}
		}},
		{name: "nothing set is the CLI defaults", env: map[string]string{}, check: func(t *testing.T, s Settings) {
			if !reflect.DeepEqual(s, Settings{}) {
				t.Fatalf("%+v", s)
			}
		}},
		{name: "min age 0 disables the gate", env: map[string]string{"KBBACKUP_PRUNE_MIN_AGE": "0"}, check: func(t *testing.T, s Settings) {
			if !s.DisableMinAge {
				t.Fatalf("%+v", s)
			}
		}},
		{name: "bad bool", env: map[string]string{"KBBACKUP_PRUNE_PATH_STYLE": "yes please"}, bad: "PATH_STYLE"},
		{name: "bad duration", env: map[string]string{"KBBACKUP_PRUNE_MIN_AGE": "7d"}, bad: "MIN_AGE"},
		{name: "wrong word", env: map[string]string{"KBBACKUP_PRUNE_CONFIRM": "DELETE", "KBBACKUP_PRUNE_INCLUDE_RETAINED": "true"}, bad: "DELETE-RETAINED"},
		{name: "bad concurrency", env: map[string]string{"KBBACKUP_PRUNE_CONCURRENCY": "0"}, bad: "CONCURRENCY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := FromEnv(func(k string) string { return tt.env[k] })
			if tt.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tt.bad) {
					t.Fatalf("err = %v, want one mentioning %s", err, tt.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, s)
		})
	}
}

func TestScopeAndRoot(t *testing.T) {
	tests := []struct {
		configured, key, root, scope string
		ok                           bool
	}{
		{"", root + "/ns/c/x", root, root, true},
		{root + "/ns", root + "/ns/c/x", root, root + "/ns", true},
		{root, root + "/x", root, root, true},
		{"pvc-11111111-1111-4111-8111-111111111111", root + "/x", root, "", false},
		{"", "unrelated/x", "", "", false},
		{"", "PVC-0A3C1A2E-6D2B-4F47-9B7E-2F7F8A1F0C11/x", "", "", false},
		{"", "/" + root + "//x", root, root, true},
	}
	for _, tt := range tests {
		r := rootOf(tt.key)
		if r != tt.root {
			t.Errorf("rootOf(%q) = %q, want %q", tt.key, r, tt.root)
			continue
		}
		if r == "" {
			continue
		}
		s, ok := scopeOf(tt.configured, r)
		if s != tt.scope || ok != tt.ok {
			t.Errorf("scopeOf(%q, %q) = %q %t, want %q %t", tt.configured, r, s, ok, tt.scope, tt.ok)
		}
	}
}

// sink collects emitted events.
type sink []event.Event

func (s *sink) Emit(_ context.Context, e event.Event) error { *s = append(*s, e); return nil }

func newEvent(t *testing.T, typ string, data any) event.Event {
	t.Helper()
	e := event.New()
	e.SetID("id-1")
	e.SetSource("test")
	e.SetType(typ)
	if data != nil {
		if err := e.SetData(event.ApplicationJSON, data); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// TestHandleWithoutNetwork covers what Handle decides before it reads the
// cluster or the bucket: with no client at all, any attempt to read would
// fail with a server error.
func TestHandleWithoutNetwork(t *testing.T) {
	tests := []struct {
		name     string
		settings Settings
		e        func(t *testing.T) event.Event
		want     error
	}{
		{"delete request without the word", Settings{Settings: execute.Settings{BackupRepo: "r"}}, func(t *testing.T) event.Event {
			return newEvent(t, events.PruneRequested, events.PruneRequest{DryRun: ptr(false)})
		}, events.ErrMalformed},
		{"request with an unknown field", Settings{Settings: execute.Settings{BackupRepo: "r"}}, func(t *testing.T) event.Event {
			return newEvent(t, events.PruneRequested, json.RawMessage(`{"dryrun":false}`))
		}, events.ErrMalformed},
		{"request that is not JSON", Settings{Settings: execute.Settings{BackupRepo: "r"}}, func(t *testing.T) event.Event {
			return newEvent(t, events.PruneRequested, []byte(`[`))
		}, events.ErrMalformed},
		{"unknown type", Settings{Settings: execute.Settings{BackupRepo: "r"}}, func(t *testing.T) event.Event { return newEvent(t, "com.example.other", nil) }, events.ErrUnsupported},
		{"tick without a repo", Settings{}, func(t *testing.T) event.Event { return newEvent(t, events.Resync, nil) }, nil},
		{"apiserver event", Settings{Settings: execute.Settings{BackupRepo: "r"}}, func(t *testing.T) event.Event {
			return newEvent(t, events.APIServerAdd, map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p"}})
		}, nil},
		{"s3 test event", Settings{Settings: execute.Settings{BackupRepo: "r"}}, func(t *testing.T) event.Event {
			return newEvent(t, events.S3TypePrefix+"s3:TestEvent", json.RawMessage(`{"Service":"S3","Event":"s3:TestEvent"}`))
		}, nil},
		{"s3 notification without a repo", Settings{}, func(t *testing.T) event.Event {
			return newEvent(t, events.S3ObjectNotification, events.S3Record{Bucket: "b", Key: root + "/x", EventName: "ObjectCreated:Put"})
		}, nil},
		{"malformed s3 notification", Settings{Settings: execute.Settings{BackupRepo: "r"}}, func(t *testing.T) event.Event {
			return newEvent(t, events.S3ObjectNotification, json.RawMessage(`{"bucket":"b"}`))
		}, events.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out sink
			f := &Function{Settings: tt.settings, Emitter: &out}
			err := f.Handle(context.Background(), tt.e(t))
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if len(out) != 0 {
				t.Fatalf("emitted %d events", len(out))
			}
		})
	}
}

// reads counts what the function read from the cluster.
type reads struct {
	client.Reader
	gets []string
}

func (r *reads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets = append(r.gets, key.String())
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestHandleS3Selects: records of other buckets, outside pvc roots or not
// about object content cause no run (not even the Secret read); a record
// in a pvc root of the repo's bucket does (here it stops at the missing
// credential Secret, before any S3 request, and says so on the repo).
func TestHandleS3Selects(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	gvk := kubeinv.GVKBackupRepo
	s.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
	s.AddKnownTypeWithName(schema.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind + "List"}, &unstructured.UnstructuredList{})
	repo := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"config": map[string]any{"bucket": "bkt"}},
		"status": map[string]any{"generatedCSIDriverSecret": map[string]any{"namespace": "kb", "name": "gen-cred"}}}}
	repo.SetGroupVersionKind(gvk)
	repo.SetName("repo")
	tests := []struct {
		name   string
		record events.S3Record
		run    bool
	}{
		{"another bucket", events.S3Record{Bucket: "other", Key: root + "/x", EventName: "ObjectCreated:Put"}, false},
		{"outside any pvc root", events.S3Record{Bucket: "bkt", Key: "unrelated/x", EventName: "ObjectCreated:Put"}, false},
		{"tagging", events.S3Record{Bucket: "bkt", Key: root + "/x", EventName: "ObjectTagging:Put"}, false},
		{"created in a root", events.S3Record{Bucket: "bkt", Key: root + "/x", EventName: "ObjectCreated:Put"}, true},
		{"removed in a root", events.S3Record{Bucket: "bkt", Key: root + "/x", EventName: "ObjectRemoved:DeleteMarkerCreated"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &reads{Reader: fake.NewClientBuilder().WithScheme(s).WithObjects(repo.DeepCopy()).Build()}
			rec := record.NewFakeRecorder(10)
			var out sink
			f := &Function{Client: r, Settings: Settings{Settings: execute.Settings{BackupRepo: "repo"}}, Emitter: &out, Recorder: rec}
			err := f.Handle(context.Background(), newEvent(t, events.S3ObjectNotification, tt.record))
			secretRead := len(r.gets) > 1 && r.gets[1] == "kb/gen-cred"
			if tt.run != secretRead || tt.run != (err != nil) {
				t.Fatalf("run %t: reads %v, err %v", tt.run, r.gets, err)
			}
			if tt.run {
				if events.IsClientError(err) || len(rec.Events) != 1 || !strings.Contains(<-rec.Events, "PruneFailed") {
					t.Fatalf("err %v, %d events", err, len(rec.Events))
				}
			}
			if len(out) != 0 {
				t.Fatalf("emitted %d events", len(out))
			}
		})
	}
}

func TestReportData(t *testing.T) {
	pl := engine.Plan{Repository: "repo", Bucket: "bkt", Prefix: root, Versioning: engine.VersioningDisabled, DeleteObjects: 3, DeleteBytes: 30}
	for i := range events.MaxReportedCandidates + 5 {
		pl.Candidates = append(pl.Candidates, engine.Candidate{Type: engine.TypeBackup, State: engine.StateOrphan, Prefix: root + "/" + string(rune('a'+i%26))})
	}
	pl.Candidates = append(pl.Candidates, engine.Candidate{Type: engine.TypeProtectedUserVolume, State: engine.StateProtected, Prefix: "u"})
	p := params{trigger: events.PruneTriggerS3, cause: "c", run: execute.Settings{BackupRepo: "repo"}, mode: modePlan}
	d := planData(pl, p)
	if d.StateCounts["orphan"] != events.MaxReportedCandidates+5 || d.StateCounts["protected"] != 1 || len(d.Candidates) != events.MaxReportedCandidates ||
		!d.Truncated || d.Prefix != root || d.Blockers == nil || d.EligibleObjects != 3 {
		t.Fatalf("%+v", d)
	}
	var out sink
	f := &Function{Emitter: &out, Now: func() time.Time { return time.Unix(1, 0) }}
	for range 2 {
		if err := f.emit(context.Background(), events.PrunePlanned, p, d); err != nil {
			t.Fatal(err)
		}
	}
	d.EligibleObjects = 0
	if err := f.emit(context.Background(), events.PrunePlanned, p, d); err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || out[0].ID() != out[1].ID() || out[0].ID() == out[2].ID() || out[0].Subject() != "repo" {
		t.Fatalf("ids %s %s %s", out[0].ID(), out[1].ID(), out[2].ID())
	}
}
