package kopia

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/repo/blob/throttling"
	"github.com/kopia/kopia/repo/content"
	"github.com/kopia/kopia/repo/format"
)

var (
	errInvalidPassword = repo.ErrInvalidPassword
	errNotInitialized  = repo.ErrRepositoryNotInitialized
)

// CreateOptions are the format choices of a new repository; empty fields take
// kopia's defaults. They are fixed once the repository exists.
type CreateOptions struct {
	Encryption         string `json:"encryption,omitempty"`
	Splitter           string `json:"splitter,omitempty"`
	Hash               string `json:"hash,omitempty"`
	ECC                string `json:"ecc,omitempty"`
	ECCOverheadPercent int    `json:"eccOverheadPercent,omitempty"`
}

// DefaultCacheMB is the kopia CLI's default for both caches.
const DefaultCacheMB = 5000

// OpenOptions say where the repository is and who writes to it.
type OpenOptions struct {
	Backend  Backend
	Password string
	// Create initialises the repository when the location holds none.
	Create *CreateOptions
	// Username and Hostname are the writer's identity (kopia's client options).
	Username, Hostname string
	// WorkDir holds kopia's cache; a temp dir when empty.
	WorkDir string
	// ConfigDir holds the connection config, which names the storage with
	// its credentials; a private temp dir when empty. It is never WorkDir:
	// a Persistent cache is a PVC that outlives the run.
	ConfigDir string
	// Throttle limits IO against storage; zero fields are unlimited.
	Throttle Throttle
	// ContentCacheMB and MetadataCacheMB bound the local caches (DefaultCacheMB when 0).
	ContentCacheMB, MetadataCacheMB int64
	// ReadOnly opens the repository without write access.
	ReadOnly bool
	// NoCache opens without a local cache directory: indexes are held in
	// memory and contents are read straight from storage. A one-pass read
	// (a restore) touches each content once, and kopia's cache would write
	// every byte read a second time to local disk. kopia cannot skip only
	// the data cache (a zero data size with a cache directory crashes it).
	NoCache bool
	// Guard, when set, refuses every snapshot whose source this session
	// may not read or change: loads by id fail with ClassSourceNotAllowed
	// and listings leave such snapshots out. A repository shared by
	// tenants sets it so one tenant's run never touches another's data,
	// whatever id its status names.
	Guard SourceGuard
}

// SourceGuard says why a snapshot of src is not this session's to touch,
// or nil when it is.
type SourceGuard func(src Source) error

// Throttle is a repository's moverDefaults.throttle, as kopia's storage
// throttler takes it.
type Throttle struct {
	UploadBytesPerSecond   float64 `json:"uploadBytesPerSecond,omitempty"`
	DownloadBytesPerSecond float64 `json:"downloadBytesPerSecond,omitempty"`
	ReadsPerSecond         float64 `json:"readsPerSecond,omitempty"`
	WritesPerSecond        float64 `json:"writesPerSecond,omitempty"`
}

// Repo is an open kopia repository.
type Repo struct {
	rep     repo.Repository
	backend Backend
	created bool
	workDir string
	// ownDirs are temp dirs Open made, removed on Close.
	ownDirs []string
	guard   SourceGuard
}

// Open connects to the repository described by o, creating it first when
// o.Create is set and the location is empty.
func Open(ctx context.Context, o OpenOptions) (*Repo, error) {
	if o.Password == "" {
		return nil, &Error{Class: ClassInvalidConfig, Err: errors.New("the repository password is empty")}
	}
	r := &Repo{backend: o.Backend, workDir: o.WorkDir, guard: o.Guard}
	configDir := o.ConfigDir
	for _, d := range []*string{&r.workDir, &configDir} {
		if *d != "" {
			continue
		}
		tmp, err := os.MkdirTemp("", "snapflow-kopia-")
		if err != nil {
			r.cleanup()
			return nil, classify(err)
		}
		*d, r.ownDirs = tmp, append(r.ownDirs, tmp)
	}
	fail := func(err error) (*Repo, error) {
		r.cleanup()
		return nil, err
	}
	// Earlier versions kept the config beside the cache; on a Persistent
	// cache it would keep the storage credentials on a PVC for good.
	if err := os.Remove(filepath.Join(r.workDir, "repository.config")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fail(classify(fmt.Errorf("remove an old kopia config from the cache: %w", err)))
	}
	limits := throttling.Limits{UploadBytesPerSecond: o.Throttle.UploadBytesPerSecond, DownloadBytesPerSecond: o.Throttle.DownloadBytesPerSecond,
		ReadsPerSecond: o.Throttle.ReadsPerSecond, WritesPerSecond: o.Throttle.WritesPerSecond}
	st, err := o.Backend.storage(ctx, o.Create != nil, o.ReadOnly, limits)
	if err != nil {
		return fail(err)
	}
	defer st.Close(ctx) //nolint:errcheck // Connect copies what it needs.

	configFile := filepath.Join(configDir, "repository.config")
	// kopia turns caching off entirely when the content cache size is 0, so
	// unset sizes take the kopia CLI's defaults instead.
	if o.ContentCacheMB == 0 {
		o.ContentCacheMB = DefaultCacheMB
	}
	if o.MetadataCacheMB == 0 {
		o.MetadataCacheMB = DefaultCacheMB
	}
	copts := &repo.ConnectOptions{
		ClientOptions: repo.ClientOptions{Username: o.Username, Hostname: o.Hostname, ReadOnly: o.ReadOnly},
		CachingOptions: content.CachingOptions{
			CacheDirectory:         filepath.Join(r.workDir, "cache"),
			ContentCacheSizeBytes:  o.ContentCacheMB << 20,
			MetadataCacheSizeBytes: o.MetadataCacheMB << 20,
		},
	}
	if o.NoCache {
		copts.CachingOptions = content.CachingOptions{}
	}
	if copts.Username == "" {
		copts.Username = "snapflow"
	}
	if copts.Hostname == "" {
		copts.Hostname = "snapflow"
	}
	// repo.Connect would open the repository once to verify the password and
	// the caller a second time to use it: two key derivations and two index
	// loads per mover run. Write the connection config instead and open once;
	// a wrong password is reported by that open all the same.
	if _, err := st.GetMetadata(ctx, format.KopiaRepositoryBlobID); errors.Is(err, blob.ErrBlobNotFound) {
		if o.Create == nil {
			return fail(&Error{Class: ClassNotInitialized, Err: fmt.Errorf("no kopia repository in %s: %w", o.Backend, errNotInitialized)})
		}
		if err := repo.Initialize(ctx, st, newRepositoryOptions(*o.Create), o.Password); err != nil {
			return fail(classify(fmt.Errorf("create a kopia repository in %s: %w", o.Backend, err)))
		}
		r.created = true
	} else if err != nil {
		return fail(classify(fmt.Errorf("read the kopia repository in %s: %w", o.Backend, err)))
	}
	if err := writeConfig(ctx, configFile, st, copts); err != nil {
		return fail(classify(err))
	}
	rep, err := repo.Open(ctx, configFile, o.Password, &repo.Options{})
	if err != nil {
		return fail(classify(fmt.Errorf("open the kopia repository in %s: %w", o.Backend, err)))
	}
	r.rep = rep
	return r, nil
}

// writeConfig writes what repo.Connect would: where the storage is, the
// cache settings and the client identity.
func writeConfig(ctx context.Context, path string, st blob.Storage, o *repo.ConnectOptions) error {
	ci := st.ConnectionInfo()
	caching := o.CachingOptions
	lc := repo.LocalConfig{Storage: &ci, Caching: &caching, ClientOptions: o.ClientOptions.ApplyDefaults(ctx, "Repository in "+st.DisplayName())}
	b, err := json.Marshal(lc)
	if err != nil {
		return fmt.Errorf("encode the kopia connection config: %w", err)
	}
	if caching.CacheDirectory == "" { // NoCache
		return os.WriteFile(path, b, 0o600)
	}
	if err := os.MkdirAll(caching.CacheDirectory, 0o700); err != nil {
		return fmt.Errorf("create the kopia cache directory: %w", err)
	}
	return os.WriteFile(path, b, 0o600)
}

func newRepositoryOptions(c CreateOptions) *repo.NewRepositoryOptions {
	return &repo.NewRepositoryOptions{
		BlockFormat: format.ContentFormat{
			Hash: c.Hash, Encryption: c.Encryption, ECC: c.ECC, ECCOverheadPercent: c.ECCOverheadPercent,
		},
		ObjectFormat: format.ObjectFormat{Splitter: c.Splitter},
	}
}

// Created says whether Open initialised the repository.
func (r *Repo) Created() bool { return r.created }

// UniqueID is kopia's repository id, hex-encoded.
func (r *Repo) UniqueID() string {
	if dr, ok := r.rep.(repo.DirectRepository); ok {
		return hex.EncodeToString(dr.UniqueID())
	}
	return ""
}

// Backend is where the repository lives.
func (r *Repo) Backend() Backend { return r.backend }

// Close releases the repository and removes a temp work dir.
func (r *Repo) Close(ctx context.Context) error {
	var err error
	if r.rep != nil {
		err = r.rep.Close(ctx)
	}
	r.cleanup()
	return err
}

func (r *Repo) cleanup() {
	for _, d := range r.ownDirs {
		_ = os.RemoveAll(d)
	}
}
