package prune

import (
	"errors"
	"fmt"
	"time"
)

// objectID is the identity of a snapshot object: key and version.
type objectID struct{ key, version string }

// CompareSnapshots requires two listings of the same scope to be identical:
// the same (Key, VersionId) identities, each once, with equal Size,
// ETag, generation, delete-marker flag and exact LastModified.
func CompareSnapshots(planned, current []Object) error {
	a, err := byIdentity(planned)
	if err != nil {
		return fmt.Errorf("planned snapshot: %w", err)
	}
	b, err := byIdentity(current)
	if err != nil {
		return fmt.Errorf("current listing: %w", err)
	}
	for id, x := range a {
		y, ok := b[id]
		if !ok {
			return fmt.Errorf("objects changed: %s%s is gone", id.key, versionSuffix(id.version))
		}
		if why := objectDiff(x, y); why != "" {
			return fmt.Errorf("objects changed: %s%s %s", id.key, versionSuffix(id.version), why)
		}
	}
	for id := range b {
		if _, ok := a[id]; !ok {
			return fmt.Errorf("objects changed: %s%s is new", id.key, versionSuffix(id.version))
		}
	}
	return nil
}

func versionSuffix(v string) string {
	if v == "" {
		return ""
	}
	return " (version " + v + ")"
}

func byIdentity(os []Object) (map[objectID]Object, error) {
	m := make(map[objectID]Object, len(os))
	for _, o := range os {
		id := objectID{o.Key, o.VersionID}
		if _, dup := m[id]; dup {
			return nil, fmt.Errorf("identity %s%s is listed twice", o.Key, versionSuffix(o.VersionID))
		}
		m[id] = o
	}
	return m, nil
}

func objectDiff(x, y Object) string {
	switch {
	case x.Size != y.Size:
		return fmt.Sprintf("changed size %d -> %d", x.Size, y.Size)
	case x.ETag != y.ETag:
		return fmt.Sprintf("changed etag %s -> %s", x.ETag, y.ETag)
	case x.Generation != y.Generation:
		return fmt.Sprintf("changed generation %s -> %s", x.Generation, y.Generation)
	case x.DeleteMarker != y.DeleteMarker:
		return "changed delete-marker flag"
	case !x.LastModified.Equal(y.LastModified):
		return fmt.Sprintf("changed last-modified %s -> %s", x.LastModified.Format(time.RFC3339Nano), y.LastModified.Format(time.RFC3339Nano))
	}
	return ""
}

// CheckManifestHead compares a HEAD of the manifest with the planned
// manifest. The ETag must be non-empty and equal. A recorded VersionId
// or generation must reappear in either HEAD field, since GCS reports the
// generation as the VersionId. Ambiguity: with no version identity at all,
// LastModified is compared truncated to whole seconds, because HEAD has
// second precision while listings may carry milliseconds.
func CheckManifestHead(c Candidate, head Object) error {
	if c.ManifestKey == "" {
		return errors.New("candidate has no manifest")
	}
	if head.ETag == "" || head.ETag != c.ManifestETag {
		return fmt.Errorf("manifest changed: etag %q, planned %q", head.ETag, c.ManifestETag)
	}
	planned := []string{c.ManifestVersionID, c.ManifestGeneration}
	if c.ManifestVersionID != "" || c.ManifestGeneration != "" {
		for _, want := range planned {
			if want != "" && (head.VersionID == want || head.Generation == want) {
				return nil
			}
		}
		return fmt.Errorf("manifest changed: version %q/%q, planned %q/%q", head.VersionID, head.Generation, c.ManifestVersionID, c.ManifestGeneration)
	}
	if !head.LastModified.Truncate(time.Second).Equal(c.ManifestLastModified.Truncate(time.Second)) {
		return fmt.Errorf("manifest changed: last-modified %s, planned %s", head.LastModified.Format(time.RFC3339), c.ManifestLastModified.Format(time.RFC3339))
	}
	return nil
}
