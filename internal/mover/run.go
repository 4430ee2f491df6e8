package mover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/snapflow/snapflow/internal/identity"
	"github.com/snapflow/snapflow/internal/kopia"
)

// Options are the mover's inputs besides the work spec.
type Options struct {
	Spec *WorkSpec
	// SourceDir is where the source volume is mounted (snapshot).
	SourceDir string
	// RepositoryRoot is where a filesystem repository's volume is mounted.
	RepositoryRoot string
	// CAFile is a PEM bundle for the S3 endpoint.
	CAFile string
	// CacheDir holds kopia's cache, which may be a Persistent cache PVC.
	CacheDir string
	// ConfigDir holds kopia's connection config (it names the storage and
	// its credentials): a volume that dies with the pod.
	ConfigDir string
	// Getenv reads credentials; os.Getenv when nil.
	Getenv   func(string) string
	Reporter Reporter
	// TerminationLog receives the pod's termination message: a summary,
	// and the Report when Report is set.
	TerminationLog string
	// Report returns what Reporter recorded (a Recorder's), for the
	// termination message, from which the function writes the status.
	Report func() Report
	Now    func() time.Time
	// ProgressInterval bounds how often progress is reported (the log).
	ProgressInterval time.Duration
	// PollInterval is how often a restore waiting for its snapshot re-lists.
	PollInterval time.Duration
	// KubeConfig reaches the API server for a workload command (a stream
	// source, a streamExec restore), as the run's ServiceAccount.
	KubeConfig func() (*rest.Config, error)
}

// Result is the outcome of a snapshot run.
type Result struct {
	Start, End time.Time
	Snapshot   kopia.SnapshotResult
	Source     kopia.Source
}

// BootstrapResult is what a repository bootstrap found.
type BootstrapResult struct {
	Created  bool
	UniqueID string
	Backend  string
	Usage    kopia.Usage
	At       time.Time
}

// MemberResult is the outcome of one member of a delete run.
type MemberResult struct {
	Member DeleteMember
	// Deleted is true when the kopia snapshot is gone (including already gone).
	Deleted bool
	Message string
	// Class is the engine's error class when the member failed.
	Class string
}

// Failure is a classified error for status.failure.
type Failure struct {
	Class, Message, Hint string
	Retryable            bool
}

// Reporter writes what the mover observes onto the target's status.
type Reporter interface {
	Started(ctx context.Context, at time.Time) error
	Progress(ctx context.Context, p kopia.Progress) error
	SnapshotDone(ctx context.Context, r Result) error
	BootstrapDone(ctx context.Context, r BootstrapResult) error
	DeleteDone(ctx context.Context, results []MemberResult) error
	// RestoreResolved pins r unless a resolution is already pinned, and
	// returns the pinned one; a zero r only reads.
	RestoreResolved(ctx context.Context, r RestoreResolution) (RestoreResolution, error)
	RestoreProgress(ctx context.Context, st kopia.RestoreStats) error
	RestoreDone(ctx context.Context, r RestoreResult) error
	VerifyDone(ctx context.Context, r VerifyReport) error
	MaintenanceDone(ctx context.Context, r MaintenanceReport) error
	// PinDone records the kopia snapshot's new id (kopia rewrites the
	// manifest) and whether it is pinned.
	PinDone(ctx context.Context, oldID, newID string, pinned bool) error
	Failed(ctx context.Context, f Failure, at time.Time) error
}

// Run performs the work spec's operation and reports it. It returns the
// operation's error (the process exits non-zero on it) after reporting.
func Run(ctx context.Context, o Options) error {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	start := o.Now()
	if err := o.Reporter.Started(ctx, start); errors.Is(err, ErrAlreadyFinished) {
		// A retried pod of a finished run: the result stands.
		return nil
	} else if err != nil {
		return fmt.Errorf("report start: %w", err)
	}
	summary, opErr := run(ctx, o, start)
	// An errReported result already says why; the process still exits
	// non-zero.
	if opErr != nil && !errors.Is(opErr, errReported) {
		f := failureOf(opErr)
		summary = fmt.Sprintf("%s: %s", f.Class, f.Message)
		if err := o.Reporter.Failed(ctx, f, o.Now()); err != nil {
			opErr = errors.Join(opErr, fmt.Errorf("report the failure: %w", err))
		}
	}
	if o.TerminationLog != "" {
		msg := summary
		if o.Report != nil {
			msg = TerminationMessage(summary, o.Report())
		} else if len(msg) > maxMessage {
			msg = msg[:maxMessage]
		}
		_ = os.WriteFile(o.TerminationLog, []byte(msg), 0o644)
	}
	return opErr
}

func run(ctx context.Context, o Options, start time.Time) (string, error) {
	w := o.Spec
	open, err := openOptions(o)
	if err != nil {
		return "", err
	}
	if w.Repository.NamespaceBound {
		if err := bindToNamespace(&open, w); err != nil {
			return "", err
		}
	}
	switch w.Operation {
	case OpBootstrap, OpProbe:
		if w.Operation == OpBootstrap {
			open.Create = w.Repository.Create
		}
		r, err := kopia.Open(ctx, open)
		if err != nil {
			return "", err
		}
		defer r.Close(ctx)
		u, err := r.Usage(ctx)
		if err != nil {
			return "", err
		}
		res := BootstrapResult{Created: r.Created(), UniqueID: r.UniqueID(), Backend: w.Repository.Backend.Kind(), Usage: u, At: o.Now()}
		if err := o.Reporter.BootstrapDone(ctx, res); err != nil {
			return "", fmt.Errorf("report the result: %w", err)
		}
		verb := "connected to"
		if res.Created {
			verb = "created"
		}
		return fmt.Sprintf("%s repository %s (%d snapshots)", verb, res.UniqueID, u.Snapshots), nil

	case OpDelete:
		r, err := kopia.Open(ctx, open)
		if err != nil {
			return "", err
		}
		defer r.Close(ctx)
		ids := make([]string, 0, len(w.Delete.Members))
		for _, m := range w.Delete.Members {
			ids = append(ids, m.SnapshotID)
		}
		var check func(string, kopia.Source) error
		if w.Repository.NamespaceBound {
			owner := map[string]string{}
			for _, m := range w.Delete.Members {
				owner[m.SnapshotID] = m.Namespace
			}
			check = func(id string, src kopia.Source) error { return ownedBy(src, owner[id]) }
		}
		res, err := r.Delete(ctx, ids, check)
		if err != nil {
			return "", err
		}
		done := map[string]bool{}
		for _, id := range append(res.Deleted, res.Missing...) {
			done[id] = true
		}
		var results []MemberResult
		var finished []int
		for i, m := range w.Delete.Members {
			mr := MemberResult{Member: m, Deleted: done[m.SnapshotID]}
			if mr.Deleted {
				finished = append(finished, i)
			}
			if e := res.Failed[m.SnapshotID]; e != nil {
				mr.Message, mr.Class = oneLine(e.Error()), kopia.ClassOf(e)
			}
			results = append(results, mr)
		}
		if err := o.Reporter.DeleteDone(ctx, results); err != nil {
			return "", fmt.Errorf("report the result: %w", err)
		}
		// The second line is what the cleanup function releases on.
		return fmt.Sprintf("deleted %d kopia snapshots (%d already gone, %d failed) in one session\n%s",
			len(res.Deleted), len(res.Missing), len(res.Failed), FormatDeleted(finished)), nil

	case OpRestore:
		return runRestore(ctx, o, start, open)

	case OpVerify:
		return runVerify(ctx, o, open)

	case OpMaintenance:
		return runMaintenance(ctx, o, open)

	case OpPin:
		r, err := kopia.Open(ctx, open)
		if err != nil {
			return "", err
		}
		defer r.Close(ctx)
		id, err := r.SetPin(ctx, w.Pin.SnapshotID, w.Pin.Pin)
		if err != nil {
			return "", err
		}
		if err := o.Reporter.PinDone(ctx, w.Pin.SnapshotID, id, w.Pin.Pin); err != nil {
			return "", fmt.Errorf("report the result: %w", err)
		}
		verb := "pinned"
		if !w.Pin.Pin {
			verb = "unpinned"
		}
		return fmt.Sprintf("%s kopia snapshot %s (now %s)", verb, w.Pin.SnapshotID, id), nil

	case OpSnapshot:
		s := w.Snapshot
		open.Username, open.Hostname = s.Source.Username, s.Source.Hostname
		// List the source while the repository opens (key derivation
		// keeps one core busy); the snapshot takes over what is listed.
		var pf *kopia.Prefetch
		if s.Stream == nil {
			pf = kopia.StartPrefetch(o.SourceDir)
			defer pf.Stop()
		}
		r, err := kopia.Open(ctx, open)
		if err != nil {
			return "", err
		}
		defer r.Close(ctx)
		var stream *kopia.Stream
		if s.Stream != nil {
			// Started once the repository opens: a run that cannot write
			// never makes the workload dump.
			if stream, err = startStream(ctx, o, s.Stream); err != nil {
				return "", err
			}
			defer stream.Reader.Close()
		}
		tags := map[string]string{}
		for k, v := range s.Tags {
			tags[k] = v
		}
		for k, v := range s.CustomParameters {
			tags["custom."+k] = fmt.Sprint(v)
		}
		res, err := r.Snapshot(ctx, kopia.SnapshotRequest{
			Dir: o.SourceDir, Stream: stream, Source: s.Source, Policy: s.Policy, PolicyName: s.PolicyName,
			Meta: s.Meta, Tags: tags, Description: s.Description, Pin: s.Pin, Prefetch: pf,
			Progress:         func(p kopia.Progress) { _ = o.Reporter.Progress(ctx, p) },
			ProgressInterval: o.ProgressInterval,
		})
		if err != nil {
			return "", err
		}
		if err := o.Reporter.SnapshotDone(ctx, Result{Start: start, End: o.Now(), Snapshot: res, Source: s.Source}); err != nil {
			return "", fmt.Errorf("report the result: %w", err)
		}
		if res.Unchanged {
			return fmt.Sprintf("unchanged since snapshot %s", res.ID), nil
		}
		return fmt.Sprintf("snapshot %s: %d new, %d modified, %d unchanged files, %d bytes uploaded",
			res.ID, res.Stats.FilesNew, res.Stats.FilesModified, res.Stats.FilesUnchanged, res.Stats.BytesNew), nil
	}
	return "", fmt.Errorf("unknown operation %q", w.Operation)
}

// bindToNamespace confines a run in a namespace-bound repository to its
// target namespace's snapshots. A delete batch is checked per member, and
// a bootstrap touches no snapshot.
func bindToNamespace(open *kopia.OpenOptions, w *WorkSpec) error {
	switch w.Operation {
	// Maintenance works on the whole repository: only the namespace the
	// repository's owner names may run it (admission and the function).
	case OpBootstrap, OpProbe, OpDelete, OpMaintenance:
		return nil
	}
	ns := w.Target.Namespace
	if ns == "" {
		return &kopia.Error{Class: kopia.ClassInvalidConfig, Err: fmt.Errorf("the work spec binds the run to its target's namespace, but target %s/%s has none", w.Target.Kind, w.Target.Name)}
	}
	if w.Operation == OpSnapshot && w.Snapshot != nil {
		if err := ownedBy(w.Snapshot.Source, ns); err != nil {
			return &kopia.Error{Class: kopia.ClassSourceNotAllowed, Err: err}
		}
	}
	open.Guard = func(src kopia.Source) error { return ownedBy(src, ns) }
	return nil
}

func ownedBy(src kopia.Source, ns string) error {
	if ns == "" {
		return errors.New("the member names no namespace")
	}
	if p := identity.OwnerProblem(src.Hostname, ns); p != "" {
		return errors.New(p)
	}
	return nil
}

// openOptions resolves the work spec's repository against the mounts and env.
func openOptions(o Options) (kopia.OpenOptions, error) {
	w := o.Spec
	b := w.Repository.Backend
	open := kopia.OpenOptions{
		Password: o.Getenv(EnvPassword), WorkDir: o.CacheDir, ConfigDir: o.ConfigDir,
		ContentCacheMB: w.ContentCacheMB, MetadataCacheMB: w.MetadataCacheMB,
	}
	if t := w.Repository.Throttle; t != nil {
		open.Throttle = *t
	}
	if open.Password == "" {
		return open, &kopia.Error{Class: kopia.ClassInvalidConfig, Err: fmt.Errorf("%s is empty: the Secret named by spec.encryption.passwordSecretRef has no value under that key", EnvPassword)}
	}
	switch {
	case b.Filesystem != nil:
		if o.RepositoryRoot == "" {
			return open, &kopia.Error{Class: kopia.ClassInvalidConfig, Err: errors.New("a filesystem repository needs --repository-root (the mounted repository volume)")}
		}
		fs := *b.Filesystem
		fs.Path = filepath.Join(o.RepositoryRoot, filepath.Clean("/"+fs.Path))
		b.Filesystem = &fs
	case b.S3 != nil:
		s3 := *b.S3
		s3.AccessKeyID, s3.SecretAccessKey, s3.SessionToken = o.Getenv(EnvAccessKeyID), o.Getenv(EnvSecretAccessKey), o.Getenv(EnvSessionToken)
		if o.CAFile != "" {
			ca, err := os.ReadFile(o.CAFile)
			if err != nil {
				return open, &kopia.Error{Class: kopia.ClassInvalidConfig, Err: fmt.Errorf("read the CA bundle: %w", err)}
			}
			s3.RootCA = ca
		}
		b.S3 = &s3
	case b.SFTP != nil:
		sf := *b.SFTP
		sf.Password, sf.PrivateKey, sf.KnownHosts = o.Getenv(EnvSFTPPassword), o.Getenv(EnvSFTPKeyData), o.Getenv(EnvSFTPKnownHosts)
		b.SFTP = &sf
	case b.WebDAV != nil:
		dav := *b.WebDAV
		dav.Username, dav.Password = o.Getenv(EnvWebDAVUsername), o.Getenv(EnvWebDAVPassword)
		b.WebDAV = &dav
	case b.GCS != nil:
		g := *b.GCS
		g.CredentialsJSON = []byte(o.Getenv(EnvGCSCredentials))
		b.GCS = &g
	}
	open.Backend = b
	return open, nil
}

func failureOf(err error) Failure {
	var ke *kopia.Error
	if errors.As(err, &ke) {
		return Failure{Class: ke.Class, Message: oneLine(err.Error()), Hint: ke.Hint(), Retryable: ke.Retryable()}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Failure{Class: "Interrupted", Message: oneLine(err.Error()), Retryable: true}
	}
	return Failure{Class: kopia.ClassInternal, Message: oneLine(err.Error()), Retryable: true}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
