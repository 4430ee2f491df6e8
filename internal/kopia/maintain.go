package kopia

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/repo/maintenance"
	"github.com/kopia/kopia/repo/maintenancestats"
	"github.com/kopia/kopia/snapshot/snapshotmaintenance"
)

// Maintenance modes and safety levels, as kopia names them.
const (
	MaintainQuick = "quick"
	MaintainFull  = "full"
	SafetyFull    = "full"
	SafetyNone    = "none"
)

// MaintainOptions say which maintenance to run and who may run it. The
// session's identity (OpenOptions Username@Hostname) is the owner this
// run claims.
type MaintainOptions struct {
	// Mode is MaintainQuick or MaintainFull.
	Mode string
	// Aliases are owners that are this one under another name.
	Aliases []string
	// Takeover takes ownership from any other owner.
	Takeover bool
	// Safety is SafetyFull (kopia's default margins, safe beside running
	// backups) or SafetyNone (reclaims at once; safe only when nothing else
	// writes to the repository).
	Safety string
}

// StorageUsage is what the repository's storage holds.
type StorageUsage struct {
	Blobs int64 `json:"blobs"`
	Bytes int64 `json:"bytes"`
}

// MaintainResult is the outcome of one maintenance session.
type MaintainResult struct {
	// Owner is the session's identity; PreviousOwner who owned the
	// repository's maintenance before (empty: nobody).
	Owner, PreviousOwner string
	// Skipped is set when another owner holds maintenance and takeover is
	// not allowed: nothing was changed.
	Skipped bool
	// TookOver is set when this run made Owner the owner.
	TookOver bool
	// Counted says Before and After were measured: on full runs only, as
	// listing every blob of a large bucket each hour costs more than a
	// quick run itself.
	Counted       bool
	Before, After StorageUsage
	// Referenced and Unreferenced are the packed sizes of the contents
	// the full run's snapshot garbage collection found in use and found
	// no snapshot using (nil: it recorded none, or a mover too old to
	// count them reported the run). See Reclaimable.
	Referenced   *int64 `json:",omitempty"`
	Unreferenced *int64 `json:",omitempty"`
	Duration     time.Duration
}

// ErrNotOwner is returned with a skipped result.
var ErrNotOwner = errors.New("another kopia user owns this repository's maintenance")

// Maintain runs kopia's quick or full maintenance: index compaction and,
// when full, snapshot garbage collection and deletion of unreferenced
// blobs. Ownership is kopia's own (one user@host per repository), so two
// clusters that share a repository never collect garbage at once.
func (r *Repo) Maintain(ctx context.Context, o MaintainOptions) (MaintainResult, error) {
	dr, ok := r.rep.(repo.DirectRepository)
	if !ok {
		return MaintainResult{}, &Error{Class: ClassInternal, Err: errors.New("maintenance needs a direct repository connection")}
	}
	var mode maintenance.Mode
	switch o.Mode {
	case MaintainQuick:
		mode = maintenance.ModeQuick
	case MaintainFull:
		mode = maintenance.ModeFull
	default:
		return MaintainResult{}, &Error{Class: ClassInvalidConfig, Err: fmt.Errorf("maintenance mode %q is neither %s nor %s", o.Mode, MaintainQuick, MaintainFull)}
	}
	var safety maintenance.SafetyParameters
	switch o.Safety {
	case "", SafetyFull:
		safety = maintenance.SafetyFull
	case SafetyNone:
		safety = maintenance.SafetyNone
	default:
		return MaintainResult{}, &Error{Class: ClassInvalidConfig, Err: fmt.Errorf("maintenance safety %q is neither %s nor %s", o.Safety, SafetyFull, SafetyNone)}
	}
	res := MaintainResult{Owner: dr.ClientOptions().UsernameAtHost()}
	// The owner is decided on what storage says now, not on the manifests
	// this connection loaded when it opened.
	if err := dr.Refresh(ctx); err != nil {
		return res, classify(fmt.Errorf("refresh before maintenance: %w", err))
	}
	var started time.Time
	// One session: the ownership taken is the ownership kopia checks
	// before it runs.
	err := repo.DirectWriteSession(ctx, dr, repo.WriteSessionOptions{Purpose: "snapflow:maintenance"}, func(ctx context.Context, dw repo.DirectRepositoryWriter) error {
		p, err := maintenance.GetParams(ctx, dw)
		if err != nil {
			return fmt.Errorf("read the maintenance owner: %w", err)
		}
		res.PreviousOwner = p.Owner
		if p.Owner != res.Owner {
			if p.Owner != "" && !slices.Contains(o.Aliases, p.Owner) && !o.Takeover {
				res.Skipped = true
				return fmt.Errorf("%w: %s owns it, this run is %s; set ownership.takeoverPolicy: Always, or list %s in ownership.ownerAliases, to take it over",
					ErrNotOwner, p.Owner, res.Owner, p.Owner)
			}
			p.Owner = res.Owner
			if err := maintenance.SetParams(ctx, dw, p); err != nil {
				return fmt.Errorf("take the maintenance ownership: %w", err)
			}
			if err := dw.Flush(ctx); err != nil {
				return fmt.Errorf("take the maintenance ownership: %w", err)
			}
			res.TookOver = true
		}
		res.Counted = mode == maintenance.ModeFull
		if res.Counted {
			if res.Before, err = storageUsage(ctx, dw); err != nil {
				return err
			}
		}
		started = time.Now()
		if err := snapshotmaintenance.Run(ctx, dw, mode, false, safety); err != nil {
			var no maintenance.NotOwnedError
			if errors.As(err, &no) {
				// Another owner took it between the check and the run.
				res.Skipped, res.PreviousOwner, res.TookOver = true, no.Owner, false
				return fmt.Errorf("%w: %s took it over before this run started", ErrNotOwner, no.Owner)
			}
			return fmt.Errorf("%s maintenance: %w", o.Mode, err)
		}
		res.Duration = time.Since(started)
		if !res.Counted {
			return nil
		}
		// Counted in this session: it sees the blobs it deleted as gone.
		if res.After, err = storageUsage(ctx, dw); err != nil {
			return err
		}
		// An estimate: a run that did its work is not failed for want
		// of it.
		res.Referenced, res.Unreferenced = gcCounts(ctx, dw, started)
		return nil
	})
	if res.Skipped {
		return res, err
	}
	if err != nil {
		if !started.IsZero() && res.Duration == 0 {
			res.Duration = time.Since(started)
		}
		return res, classify(err)
	}
	return res, nil
}

// Reclaimable is what later full runs can free, at most: the contents
// no snapshot referenced when this run collected garbage (those younger
// than the safety margin, and those it marked deleted), bounded by what
// storage still held beyond the referenced ones once the run had freed
// what it could. Indexes, logs and the live part of packs kopia does not
// rewrite are never counted. ok is false when the run did not count.
func (r MaintainResult) Reclaimable() (bytes int64, ok bool) {
	if !r.Counted || r.Referenced == nil || r.Unreferenced == nil {
		return 0, false
	}
	return min(max(r.After.Bytes-*r.Referenced, 0), *r.Unreferenced), true
}

// gcCounts reads what the snapshot garbage collection of the run that
// started at started counted, from the run history kopia keeps in the
// repository; nil when that run left no statistics or they cannot be read.
func gcCounts(ctx context.Context, dr repo.DirectRepository, started time.Time) (referenced, unreferenced *int64) {
	s, err := maintenance.GetSchedule(ctx, dr)
	if err != nil {
		return nil, nil
	}
	kind := (&maintenancestats.SnapshotGCStats{}).Kind()
	for _, run := range s.Runs[maintenance.TaskSnapshotGarbageCollection] {
		if run.Start.Before(started.Add(-time.Second)) {
			break // newest first: older runs are not this one's
		}
		if !run.Success {
			continue
		}
		for _, e := range run.Extra {
			var st maintenancestats.SnapshotGCStats
			if e.Kind != kind || json.Unmarshal(e.Data, &st) != nil {
				continue
			}
			used, unused := st.InUseContentSize+st.InUseSystemContentSize, st.UnreferencedContentSize+st.UnreferencedRecentContentSize
			return &used, &unused
		}
	}
	return nil, nil
}

// storageUsage counts every blob the storage holds.
func storageUsage(ctx context.Context, dr repo.DirectRepository) (StorageUsage, error) {
	var u StorageUsage
	err := dr.BlobReader().ListBlobs(ctx, "", func(bm blob.Metadata) error {
		u.Blobs++
		u.Bytes += bm.Length
		return nil
	})
	if err != nil {
		return StorageUsage{}, fmt.Errorf("list the repository's blobs: %w", err)
	}
	return u, nil
}
