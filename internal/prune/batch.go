package prune

import (
	"fmt"
)

// MaxDeleteBatch is the S3 Multi-Object Delete limit of objects per request.
const MaxDeleteBatch = 1000

// DeleteTarget is one Object element of a DeleteObjects body.
type DeleteTarget struct {
	Key string
	// VersionID is sent when set: a snapshot version, or a GCS generation.
	VersionID string
	Size      int64
}

// DeleteIdentity says how objects are identified in delete requests: by
// key, by key and VersionId, or by key and GCS generation.
type DeleteIdentity struct {
	// Versioned is true when the snapshot came from a version listing.
	Versioned bool
	// GCS sends each object's generation as its VersionId.
	GCS bool
}

// target maps one snapshot object to what is sent, refusing objects without
// an identity. Ambiguity: plain S3 sends Key only, although the snapshot must
// still carry an ETag.
func (id DeleteIdentity) target(o Object) (DeleteTarget, error) {
	t := DeleteTarget{Key: o.Key, Size: o.Size}
	if o.DeleteMarker {
		t.Size = 0
	}
	switch {
	case id.Versioned:
		if o.VersionID == "" {
			return t, fmt.Errorf("identity missing: %s has no VersionId", o.Key)
		}
		t.VersionID = o.VersionID
	case id.GCS:
		t.VersionID = o.Generation
		if t.VersionID == "" {
			t.VersionID = o.VersionID
		}
		if t.VersionID == "" {
			return t, fmt.Errorf("identity missing: %s has no generation", o.Key)
		}
	default:
		if o.ETag == "" {
			return t, fmt.Errorf("identity missing: %s has no ETag", o.Key)
		}
	}
	return t, nil
}

// DeleteBatches orders a candidate's snapshot into DeleteObjects requests of
// at most MaxDeleteBatch objects. For a backup with a manifest the
// data goes first, then the manifest's noncurrent versions, and the one
// current manifest version alone in the last batch, so a failed data batch
// (which stops the candidate) leaves the manifest to identify the backup.
// currentManifest is the VersionId or generation reported by the manifest
// HEAD; it is ignored for plain unversioned buckets.
func DeleteBatches(c Candidate, id DeleteIdentity, currentManifest string) ([][]DeleteTarget, error) {
	var data, older []DeleteTarget
	var current []DeleteTarget
	for _, o := range c.Objects {
		t, err := id.target(o)
		if err != nil {
			return nil, err
		}
		if c.Type != TypeBackup || c.ManifestKey == "" || o.Key != c.ManifestKey {
			data = append(data, t)
			continue
		}
		isCurrent := !id.Versioned && !id.GCS ||
			currentManifest != "" && (o.VersionID == currentManifest || o.Generation == currentManifest)
		if isCurrent && !o.DeleteMarker {
			current = append(current, t)
		} else {
			older = append(older, t)
		}
	}
	if c.Type == TypeBackup && c.ManifestKey != "" && len(current) != 1 {
		return nil, fmt.Errorf("manifest %s: %d current versions match %q, want exactly 1", c.ManifestKey, len(current), currentManifest)
	}
	out := Batch(data, MaxDeleteBatch)
	out = append(out, Batch(older, MaxDeleteBatch)...)
	if len(current) > 0 {
		out = append(out, current)
	}
	return out, nil
}

// Batch splits targets into consecutive groups of at most size (capped at
// MaxDeleteBatch; a non-positive size means MaxDeleteBatch).
func Batch(ts []DeleteTarget, size int) [][]DeleteTarget {
	if size <= 0 || size > MaxDeleteBatch {
		size = MaxDeleteBatch
	}
	var out [][]DeleteTarget
	for len(ts) > 0 {
		n := min(size, len(ts))
		out = append(out, ts[:n:n])
		ts = ts[n:]
	}
	return out
}

// DeleteFailure is one Error entry of a DeleteObjects response.
type DeleteFailure struct {
	Key, VersionID, Code, Message string
}

// TallyBatch matches a Quiet=false DeleteObjects response to the batch:
// Deleted and Error entries are matched by (Key, VersionId), falling
// back to Key. An empty result counts as full success, as some compatible
// servers send one. A non-nil error means the candidate must stop.
func TallyBatch(batch []DeleteTarget, deleted []DeleteTarget, failed []DeleteFailure) (objects int, bytes int64, err error) {
	if len(deleted) == 0 && len(failed) == 0 {
		for _, t := range batch {
			bytes += t.Size
		}
		return len(batch), bytes, nil
	}
	done := make([]bool, len(batch))
	match := func(key, version string) int {
		for i, t := range batch {
			if !done[i] && t.Key == key && t.VersionID == version {
				return i
			}
		}
		for i, t := range batch {
			if !done[i] && t.Key == key {
				return i
			}
		}
		return -1
	}
	for _, d := range deleted {
		if i := match(d.Key, d.VersionID); i >= 0 {
			done[i] = true
			objects++
			bytes += batch[i].Size
		}
	}
	if len(failed) > 0 {
		f := failed[0]
		return objects, bytes, fmt.Errorf("%d objects failed to delete; first %s: %s %s", len(failed), f.Key, f.Code, f.Message)
	}
	return objects, bytes, nil
}
