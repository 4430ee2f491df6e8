package kopia

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/manifest"
	"github.com/kopia/kopia/snapshot"
	"github.com/kopia/kopia/snapshot/restore"
	"github.com/kopia/kopia/snapshot/snapshotfs"
)

// SnapshotInfo describes one stored snapshot.
type SnapshotInfo struct {
	ID          string            `json:"id"`
	Source      Source            `json:"source"`
	Start       time.Time         `json:"start"`
	End         time.Time         `json:"end"`
	Description string            `json:"description,omitempty"`
	PolicyName  string            `json:"policyName,omitempty"`
	Meta        *Meta             `json:"meta,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
	Pinned      bool              `json:"pinned,omitempty"`
	SizeBytes   int64             `json:"sizeBytes"`
	Files       int64             `json:"files"`
	RootID      string            `json:"rootID"`
	Incomplete  string            `json:"incomplete,omitempty"`
}

func infoOf(m *snapshot.Manifest) SnapshotInfo {
	in := SnapshotInfo{
		ID:          string(m.ID),
		Source:      Source{Username: m.Source.UserName, Hostname: m.Source.Host, Path: m.Source.Path},
		Start:       m.StartTime.ToTime(),
		End:         m.EndTime.ToTime(),
		Description: m.Description,
		Pinned:      len(m.Pins) > 0,
		SizeBytes:   m.Stats.TotalFileSize,
		Files:       int64(m.Stats.TotalFileCount),
		RootID:      m.RootObjectID().String(),
		Incomplete:  m.IncompleteReason,
	}
	for k, v := range m.Tags {
		switch k {
		case tagConfig:
			in.PolicyName = strings.TrimPrefix(v, configPfx)
		case tagMeta:
			var meta Meta
			if json.Unmarshal([]byte(v), &meta) == nil {
				in.Meta = &meta
			}
		default:
			if t, ok := strings.CutPrefix(k, tagPrefix); ok {
				if in.Tags == nil {
					in.Tags = map[string]string{}
				}
				in.Tags[t] = v
			}
		}
	}
	return in
}

// List returns the snapshots of src (every source when src is nil), oldest first.
func (r *Repo) List(ctx context.Context, src *Source) ([]SnapshotInfo, error) {
	var si *snapshot.SourceInfo
	if src != nil {
		s := src.info()
		si = &s
	}
	ids, err := snapshot.ListSnapshotManifests(ctx, r.rep, si, nil)
	if err != nil {
		return nil, classify(fmt.Errorf("list snapshots: %w", err))
	}
	mans, err := snapshot.LoadSnapshots(ctx, r.rep, ids)
	if err != nil {
		return nil, classify(fmt.Errorf("load snapshots: %w", err))
	}
	out := make([]SnapshotInfo, 0, len(mans))
	for _, m := range mans {
		if r.refuse(m.Source) != nil {
			continue
		}
		out = append(out, infoOf(m))
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Start.Equal(out[j].Start) {
			return out[i].Start.Before(out[j].Start)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Get loads one snapshot by id.
func (r *Repo) Get(ctx context.Context, id string) (SnapshotInfo, error) {
	m, err := r.load(ctx, id)
	if err != nil {
		return SnapshotInfo{}, err
	}
	return infoOf(m), nil
}

func (r *Repo) load(ctx context.Context, id string) (*snapshot.Manifest, error) {
	m, err := snapshot.LoadSnapshot(ctx, r.rep, manifest.ID(id))
	if err != nil {
		if errors.Is(err, snapshot.ErrSnapshotNotFound) {
			return nil, &Error{Class: ClassSnapshotMissing, Err: fmt.Errorf("snapshot %s: %w", id, errNoSnapshot)}
		}
		return nil, classify(fmt.Errorf("load snapshot %s: %w", id, err))
	}
	if err := r.refuse(m.Source); err != nil {
		return nil, notAllowed(id, err)
	}
	return m, nil
}

func (r *Repo) refuse(si snapshot.SourceInfo) error {
	if r.guard == nil {
		return nil
	}
	return r.guard(sourceOfInfo(si))
}

func sourceOfInfo(si snapshot.SourceInfo) Source {
	return Source{Username: si.UserName, Hostname: si.Host, Path: si.Path}
}

func notAllowed(id string, err error) error {
	return &Error{Class: ClassSourceNotAllowed, Err: fmt.Errorf("snapshot %s was left in place: %w", id, err)}
}

// DeleteResult reports a batch deletion per member.
type DeleteResult struct {
	Deleted []string
	// Missing were already gone; deletion is idempotent, so they count as done.
	Missing []string
	Failed  map[string]error
}

// Delete removes many snapshots in one write session: one repository open,
// one index flush, however many members. check, when set, vets each
// member's source before it goes (members of one batch may belong to
// different owners); the session's Guard applies as well.
func (r *Repo) Delete(ctx context.Context, ids []string, check func(id string, src Source) error) (DeleteResult, error) {
	res := DeleteResult{Failed: map[string]error{}}
	err := repo.WriteSession(ctx, r.rep, repo.WriteSessionOptions{Purpose: "snapflow:delete"}, func(ctx context.Context, w repo.RepositoryWriter) error {
		for _, id := range ids {
			md, err := w.GetManifest(ctx, manifest.ID(id), nil)
			if err != nil {
				if errors.Is(err, manifest.ErrNotFound) {
					res.Missing = append(res.Missing, id)
					continue
				}
				res.Failed[id] = classify(err)
				continue
			}
			if t := md.Labels[manifest.TypeLabelKey]; t != snapshot.ManifestType {
				// Only snapshots are ours to delete: an id that names a
				// policy or other manifest is a wrong status, not a target.
				res.Failed[id] = &Error{Class: ClassInvalidConfig, Err: fmt.Errorf("manifest %s is a %q manifest, not a snapshot; it was left in place", id, t)}
				continue
			}
			src := Source{Username: md.Labels[snapshot.UsernameLabel], Hostname: md.Labels[snapshot.HostnameLabel], Path: md.Labels[snapshot.PathLabel]}
			if err := r.refuse(snapshot.SourceInfo{UserName: src.Username, Host: src.Hostname, Path: src.Path}); err != nil {
				res.Failed[id] = notAllowed(id, err)
				continue
			}
			if check != nil {
				if err := check(id, src); err != nil {
					res.Failed[id] = notAllowed(id, err)
					continue
				}
			}
			if err := w.DeleteManifest(ctx, manifest.ID(id)); err != nil {
				res.Failed[id] = classify(err)
				continue
			}
			res.Deleted = append(res.Deleted, id)
		}
		return nil
	})
	if err != nil {
		return DeleteResult{Failed: map[string]error{}}, classify(fmt.Errorf("delete snapshots: %w", err))
	}
	return res, nil
}

// SetPin pins or unpins a snapshot (snapflow's pin; other pins are left
// alone). kopia stores a changed manifest under a new id, so SetPin returns
// the id the snapshot has afterwards; callers must record it.
func (r *Repo) SetPin(ctx context.Context, id string, pinned bool) (string, error) {
	m, err := r.load(ctx, id)
	if err != nil {
		return "", err
	}
	add, remove := []string{pinSnapflow}, []string(nil)
	if !pinned {
		add, remove = nil, add
	}
	if !m.UpdatePins(add, remove) {
		return id, nil
	}
	err = repo.WriteSession(ctx, r.rep, repo.WriteSessionOptions{Purpose: "snapflow:pin"}, func(ctx context.Context, w repo.RepositoryWriter) error {
		return snapshot.UpdateSnapshot(ctx, w, m)
	})
	if err != nil {
		return "", classify(fmt.Errorf("pin snapshot %s: %w", id, err))
	}
	return string(m.ID), nil
}

// RestoreOptions shape how files are written back.
type RestoreOptions struct {
	Parallel               int  `json:"parallel,omitempty"`
	DeleteExtra            bool `json:"deleteExtra,omitempty"`
	IgnoreErrors           bool `json:"ignoreErrors,omitempty"`
	IgnorePermissionErrors bool `json:"ignorePermissionErrors,omitempty"`
	WriteFilesAtomically   bool `json:"writeFilesAtomically,omitempty"`
	WriteSparseFiles       bool `json:"writeSparseFiles,omitempty"`
	SkipOwners             bool `json:"skipOwners,omitempty"`
	SkipPermissions        bool `json:"skipPermissions,omitempty"`
	SkipTimes              bool `json:"skipTimes,omitempty"`
	OverwriteFiles         bool `json:"overwriteFiles,omitempty"`
	OverwriteDirectories   bool `json:"overwriteDirectories,omitempty"`
	OverwriteSymlinks      bool `json:"overwriteSymlinks,omitempty"`
	SkipExisting           bool `json:"skipExisting,omitempty"`
	// Progress receives running totals at most every ProgressInterval.
	Progress         func(RestoreStats) `json:"-"`
	ProgressInterval time.Duration      `json:"-"`
}

// RestoreStats are what a restore wrote.
type RestoreStats struct {
	Files, Dirs, Symlinks int64
	Bytes                 int64
	Skipped, Errors       int64
	// TotalBytes is the size of the snapshot being restored.
	TotalBytes int64 `json:",omitempty"`
}

// Restore writes snapshot id into dir.
func (r *Repo) Restore(ctx context.Context, id, dir string, o RestoreOptions) (RestoreStats, error) {
	m, err := r.load(ctx, id)
	if err != nil {
		return RestoreStats{}, err
	}
	root, err := snapshotfs.SnapshotRoot(r.rep, m)
	if err != nil {
		return RestoreStats{}, classify(err)
	}
	out := &restore.FilesystemOutput{
		TargetPath:             dir,
		OverwriteDirectories:   o.OverwriteDirectories,
		OverwriteFiles:         o.OverwriteFiles,
		OverwriteSymlinks:      o.OverwriteSymlinks,
		IgnorePermissionErrors: o.IgnorePermissionErrors,
		WriteFilesAtomically:   o.WriteFilesAtomically,
		SkipOwners:             o.SkipOwners,
		SkipPermissions:        o.SkipPermissions,
		SkipTimes:              o.SkipTimes,
		WriteSparseFiles:       o.WriteSparseFiles,
	}
	if err := out.Init(ctx); err != nil {
		return RestoreStats{}, classify(fmt.Errorf("prepare %s: %w", dir, err))
	}
	opts := restore.Options{
		Parallel: o.Parallel, DeleteExtra: o.DeleteExtra, IgnoreErrors: o.IgnoreErrors, Incremental: o.SkipExisting,
		// Depth 0 would write shallow placeholders below the root; restore everything.
		RestoreDirEntryAtDepth: math.MaxInt32,
	}
	if o.Progress != nil {
		every := o.ProgressInterval
		if every <= 0 {
			every = 5 * time.Second
		}
		var mu sync.Mutex
		var last time.Time
		opts.ProgressCallback = func(_ context.Context, st restore.Stats) {
			mu.Lock()
			defer mu.Unlock()
			if time.Since(last) < every {
				return
			}
			last = time.Now()
			rs := restoreStats(st)
			rs.TotalBytes = m.Stats.TotalFileSize
			o.Progress(rs)
		}
	}
	st, err := restore.Entry(ctx, r.rep, out, root, opts)
	if err != nil {
		return RestoreStats{}, classify(fmt.Errorf("restore %s into %s: %w", id, dir, err))
	}
	rs := restoreStats(st)
	rs.TotalBytes = m.Stats.TotalFileSize
	return rs, nil
}

func restoreStats(st restore.Stats) RestoreStats {
	return RestoreStats{
		Files: int64(st.RestoredFileCount), Dirs: int64(st.RestoredDirCount), Symlinks: int64(st.RestoredSymlinkCount),
		Bytes: st.RestoredTotalFileSize, Skipped: int64(st.SkippedCount), Errors: int64(st.IgnoredErrorCount),
	}
}

// Refresh reloads the repository's indexes and manifests, so snapshots
// written by other clients since Open become visible (kopia otherwise
// reloads them only every few minutes).
func (r *Repo) Refresh(ctx context.Context) error {
	if err := r.rep.Refresh(ctx); err != nil {
		return classify(fmt.Errorf("refresh the repository: %w", err))
	}
	return nil
}

// Usage summarises the repository for status.storageStats.
type Usage struct {
	Snapshots int64
	// LogicalBytes is the sum of the snapshots' source sizes.
	LogicalBytes int64
}

// Usage counts snapshots and their logical size.
func (r *Repo) Usage(ctx context.Context) (Usage, error) {
	list, err := r.List(ctx, nil)
	if err != nil {
		return Usage{}, err
	}
	u := Usage{Snapshots: int64(len(list))}
	for _, s := range list {
		u.LogicalBytes += s.SizeBytes
	}
	return u, nil
}
