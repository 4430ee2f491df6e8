package prune

import (
	"cmp"
	"slices"
	"sort"
	"strings"
	"time"
)

// Object is one listing entry: a current object from ListObjectsV2, or one
// version or delete marker from ListObjectVersions.
type Object struct {
	// Key is the raw key exactly as listed; deletes must use it verbatim.
	Key          string    `json:"key"`
	Size         int64     `json:"size"`
	ETag         string    `json:"etag,omitempty"`
	LastModified time.Time `json:"lastModified"`
	VersionID    string    `json:"versionId,omitempty"`
	// Generation is the GCS object generation, captured from plain listings.
	Generation   string `json:"generation,omitempty"`
	IsLatest     bool   `json:"isLatest,omitempty"`
	DeleteMarker bool   `json:"deleteMarker,omitempty"`
}

// IsDirectoryMarker reports whether the object is a directory marker:
// size 0 and a key ending in "/".
func (o Object) IsDirectoryMarker() bool {
	return o.Size == 0 && !o.DeleteMarker && strings.HasSuffix(strings.TrimSpace(o.Key), "/")
}

// ManifestBody is the result of reading one manifest object.
type ManifestBody struct {
	Data []byte
	// Err is the read error, if any; it makes the candidate invalid-manifest.
	Err error
}

// Listing is the object-store view the planner works from.
type Listing struct {
	Objects []Object
	// Versioned says Objects come from ListObjectVersions (every version and
	// delete marker, with IsLatest set); otherwise all objects are current.
	Versioned bool
	// Manifests holds the bodies of current manifest objects by raw key. A
	// manifest object without an entry counts as unreadable.
	Manifests map[string]ManifestBody
}

// ManifestKeys returns the raw keys of current objects named manifestName
// ("" for the default), which is what an adapter must read into
// Listing.Manifests.
func ManifestKeys(l Listing, manifestName string) []string {
	if manifestName == "" {
		manifestName = DefaultManifestName
	}
	var out []string
	for _, o := range l.Objects {
		if e, ok := newEntry(o, l.Versioned); ok && e.current && !e.slash && baseName(e.key) == manifestName {
			out = append(out, o.Key)
		}
	}
	sort.Strings(out)
	return out
}

// entry is an object placed by its normalised key.
type entry struct {
	obj     Object
	key     string
	slash   bool // the raw key ends in "/": it names its own directory level
	marker  bool
	current bool
}

// newEntry places o; ok is false for a key that climbs above the bucket or
// names nothing, which cannot be placed under any root and so lies outside
// the scan.
func newEntry(o Object, versioned bool) (entry, bool) {
	k, ok := NormalizeKey(o.Key)
	if !ok || k == "" {
		return entry{}, false
	}
	slash := strings.HasSuffix(strings.TrimSpace(o.Key), "/")
	return entry{obj: o, key: k, slash: slash, current: !versioned || (o.IsLatest && !o.DeleteMarker),
		marker: slash && o.Size == 0 && !o.DeleteMarker}, true
}

// index sorts entries by normalised key so every prefix is a contiguous run.
type index struct {
	entries   []entry
	manifests map[string]ManifestBody
}

func newIndex(l Listing) *index {
	ix := &index{manifests: l.Manifests}
	for _, o := range l.Objects {
		if e, ok := newEntry(o, l.Versioned); ok {
			ix.entries = append(ix.entries, e)
		}
	}
	sort.SliceStable(ix.entries, func(i, j int) bool { return ix.entries[i].key < ix.entries[j].key })
	return ix
}

// view filters an index to current objects, or to every version.
type view struct {
	ix      *index
	all     bool // include noncurrent versions and delete markers
	plainID bool // strip version identity (plain listing semantics)
}

// inside returns the entries that a listing of "p/" would return: keys below
// p, plus entries whose raw key is "p/" itself.
func (v view) inside(p string) []entry {
	es := v.ix.entries
	var out []entry
	lo := 0
	if p != "" {
		lo = sort.Search(len(es), func(i int) bool { return es[i].key >= p })
	}
	for i := lo; i < len(es); i++ {
		e := es[i]
		if p != "" && !Contains(p, e.key) {
			// Keys with the prefix "p/" form one sorted run; a key past "p/"
			// that lacks it lies after the run.
			if e.key > p+"/" {
				break
			}
			continue
		}
		if e.key == p && !e.slash {
			continue
		}
		if p != "" && !strings.HasPrefix(e.obj.Key, p+"/") {
			// S3 files a key by its raw bytes: "/p/x", " p/x" or
			// "q/../p/x" is not under "p/", whatever its cleaned form says,
			// so it never joins p's candidate (nor, by its raw form, any other).
			continue
		}
		if !v.all && !e.current {
			continue
		}
		if v.plainID {
			e.obj.VersionID, e.obj.IsLatest = "", false
		}
		out = append(out, e)
	}
	return out
}

// level emulates a delimiter listing of "p/": the objects at that level and
// the names of its subdirectories.
func (v view) level(p string) (contents []entry, dirs []string) {
	seen := map[string]bool{}
	for _, e := range v.inside(p) {
		if e.key == p {
			contents = append(contents, e)
			continue
		}
		segs := relSegments(p, e.key)
		if len(segs) == 1 && !e.slash {
			contents = append(contents, e)
			continue
		}
		if !seen[segs[0]] {
			seen[segs[0]] = true
			dirs = append(dirs, segs[0])
		}
	}
	sort.Strings(dirs)
	return contents, dirs
}

func objectsOf(es []entry) []Object {
	if len(es) == 0 {
		return nil
	}
	out := make([]Object, len(es))
	for i, e := range es {
		out[i] = e.obj
	}
	return out
}

func withoutMarkers(es []entry) []entry {
	var out []entry
	for _, e := range es {
		if !e.marker {
			out = append(out, e)
		}
	}
	return out
}

func onlyMarkers(es []entry) bool {
	for _, e := range es {
		if !e.marker {
			return false
		}
	}
	return true
}

func sumBytes(os []Object) int64 {
	var n int64
	for _, o := range os {
		if !o.DeleteMarker {
			n += o.Size
		}
	}
	return n
}

func newest(os []Object) time.Time {
	var t time.Time
	for _, o := range os {
		if o.LastModified.After(t) {
			t = o.LastModified
		}
	}
	return t
}

// seqEntry is an entry with its position in the listing, which orders
// entries whose keys normalise alike the way the index does.
type seqEntry struct {
	entry
	seq int
}

// sortedEntries returns es in index order: by normalised key, then by
// position in the listing.
func sortedEntries(es []seqEntry) []entry {
	if len(es) == 0 {
		return nil
	}
	slices.SortFunc(es, func(a, b seqEntry) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	out := make([]entry, len(es))
	for i := range es {
		out[i] = es[i].entry
	}
	return out
}

// objAgg summarises the objects of one candidate as they are listed: what
// classification needs, and the objects themselves only when kept. Every
// field is independent of the order the objects arrive in.
type objAgg struct {
	n, markers int
	bytes      int64
	newest     time.Time
	// young is the first object, in index order, that is young.
	young    seqEntry
	hasYoung bool
	// objs is every object when kept; mans every current object named like
	// the manifest, which is all readManifests looks at.
	objs []seqEntry
	mans []seqEntry
}

func (a *objAgg) add(e entry, seq int, cutoff time.Time, manifestName string, keep bool) {
	a.n++
	if e.marker {
		a.markers++
	}
	if !e.obj.DeleteMarker {
		a.bytes += e.obj.Size
	}
	if e.obj.LastModified.After(a.newest) {
		a.newest = e.obj.LastModified
	}
	if isYoung(e.obj.LastModified, cutoff) && (!a.hasYoung || e.key < a.young.key || e.key == a.young.key && seq < a.young.seq) {
		a.young, a.hasYoung = seqEntry{e, seq}, true
	}
	if keep {
		a.objs = append(a.objs, seqEntry{e, seq})
	}
	if isManifestEntry(e, manifestName) {
		a.mans = append(a.mans, seqEntry{e, seq})
	}
}

// onlyMarkers reports whether every object is a directory marker.
func (a *objAgg) onlyMarkers() bool { return a.markers == a.n }

// aggOf summarises entries that are already in index order.
func aggOf(es []entry, cutoff time.Time, manifestName string, keep bool) *objAgg {
	a := &objAgg{}
	for i, e := range es {
		a.add(e, i, cutoff, manifestName, keep)
	}
	return a
}

// isManifestEntry reports whether e is a current object named like the
// manifest, at any depth.
func isManifestEntry(e entry, name string) bool {
	return e.current && !e.slash && !e.obj.DeleteMarker && baseName(e.key) == name
}
