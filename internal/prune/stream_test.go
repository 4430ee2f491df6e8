package prune

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// bucketOf serves a listing with S3 semantics for a Scan: raw-key prefixes,
// delimiter levels, key order, and the adapter's Contains filter.
type bucketOf struct {
	l Listing
}

func (b bucketOf) under(p string) []Object {
	var out []Object
	for _, o := range b.l.Objects {
		if k, ok := NormalizeKey(o.Key); hasDirPrefix(o.Key, p) && ok && Contains(p, k) {
			out = append(out, o)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// level is a delimiter listing of "p/" ("" for the top).
func (b bucketOf) level(p string) (objs []Object, dirs []string) {
	lp := ""
	if p != "" {
		lp = p + "/"
	}
	for _, o := range b.l.Objects {
		if !strings.HasPrefix(o.Key, lp) {
			continue
		}
		rest := o.Key[len(lp):]
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			if d := rest[:i]; d != "" && !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		} else if k, ok := NormalizeKey(o.Key); ok && Contains(p, k) {
			objs = append(objs, o)
		}
	}
	sort.Strings(dirs)
	return objs, dirs
}

// scanPlan plans the way execute.BuildPlan does, in pages of random size.
func scanPlan(t *testing.T, inv Inventory, l Listing, opts Options, rng *rand.Rand) Plan {
	t.Helper()
	b := bucketOf{l}
	s, err := NewScan(inv, opts, now)
	if err != nil {
		t.Fatal(err)
	}
	marker := func(dir string) Object { return Object{Key: dir + "/", IsLatest: true} }
	_, top := b.level("")
	for _, r := range s.Roots(top) {
		switch r.Depth {
		case DepthNone:
			continue
		case DepthShallow:
			objs, nss := b.level(r.Root)
			for _, ns := range nss {
				nsp := JoinKey(r.Root, ns)
				if !IsDNSLabel(ns) {
					objs = append(objs, marker(nsp))
					continue
				}
				o2, cds := b.level(nsp)
				objs = append(objs, o2...)
				for _, cd := range cds {
					objs = append(objs, marker(JoinKey(nsp, cd)))
				}
			}
			if !s.Shallow(r.Root, objs) {
				continue
			}
		}
		feed := s.Root(r.Root)
		bodies := map[string]ManifestBody{}
		for objs := b.under(r.Root); len(objs) > 0; {
			n := min(len(objs), 1+rng.IntN(4))
			for _, m := range feed.Add(objs[:n]) {
				if body, ok := l.Manifests[m.Key]; ok {
					bodies[m.Key] = body
				}
			}
			objs = objs[n:]
		}
		feed.Close(bodies)
	}
	pl, err := s.Plan()
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// withoutSnapshots drops what a Scan does not keep.
func withoutSnapshots(pl Plan) Plan {
	pl.Candidates = slices.Clone(pl.Candidates)
	for i := range pl.Candidates {
		c := &pl.Candidates[i]
		if c.Type != TypeRepositoryStray {
			c.Objects = nil
		}
		if c.FullScope != nil {
			c.FullScope = []Object{}
		}
	}
	return pl
}

// A Scan fed root by root, in key order and in pages, makes NewPlan's plan
// without the snapshots, and the final snapshot of either is the same.
func TestScanMatchesNewPlan(t *testing.T) {
	iterations := 3000
	if testing.Short() {
		iterations = 300
	}
	for seed := range uint64(iterations) {
		w := generate(seed)
		inv := w.f.inv()
		want, err := NewPlan(inv, w.f.listing(), w.f.opts, now)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		got := scanPlan(t, inv, w.f.listing(), w.f.opts, rand.New(rand.NewPCG(seed, 1)))
		if !reflect.DeepEqual(withoutSnapshots(want), got) {
			t.Fatalf("seed %d: scan plan differs:\n%s", seed, planDiff(withoutSnapshots(want), got))
		}
		if want.Blocked() {
			continue
		}
		wantFin, err1 := FinalSnapshot(want, inv, w.f.listing(), now)
		gotFin, err2 := FinalSnapshot(got, inv, w.f.listing(), now)
		if fmt.Sprint(err1) != fmt.Sprint(err2) || !reflect.DeepEqual(wantFin, gotFin) {
			t.Fatalf("seed %d: final snapshots differ (%v, %v):\n%s", seed, err1, err2, planDiff(wantFin, gotFin))
		}
	}
}

func planDiff(a, b Plan) string {
	if len(a.Candidates) != len(b.Candidates) {
		return fmt.Sprintf("want:\n%sgot:\n%s", dump(a), dump(b))
	}
	for i := range a.Candidates {
		if !reflect.DeepEqual(a.Candidates[i], b.Candidates[i]) {
			return fmt.Sprintf("want %+v\ngot  %+v", a.Candidates[i], b.Candidates[i])
		}
	}
	a.Candidates, b.Candidates = nil, nil
	return fmt.Sprintf("want %+v\ngot  %+v", a, b)
}

// A Scan keeps no object of a backup directory, only its counts.
func TestScanKeepsCountsNotObjects(t *testing.T) {
	f := newFixture()
	dir := R + "/app/" + C + "/pg/b1"
	f.manifest(R, dir, "Delete", old, nil)
	for i := range 500 {
		f.put(fmt.Sprintf("%s/data/%04d", dir, i), 10, old)
	}
	f.put(R+"/app/"+C+"/loose", 3, old)
	f.opts.DeleteRepositoryStray = true
	pl := scanPlan(t, f.inv(), f.listing(), f.opts, rand.New(rand.NewPCG(1, 1)))
	var bytes int64
	for _, o := range f.objs {
		if Contains(dir, o.Key) {
			bytes += o.Size
		}
	}
	b := mustFind(t, pl, TypeBackup, dir)
	if b.State != StateOrphan || b.ObjectCount != 501 || b.Bytes != bytes || b.Objects != nil {
		t.Fatalf("backup %+v", b)
	}
	st := mustFind(t, pl, TypeRepositoryStray, R+"/app/"+C)
	if len(st.Objects) != 1 || st.FullScope == nil || len(st.FullScope) != 0 {
		t.Fatalf("stray keeps %d planned keys and full scope %v", len(st.Objects), st.FullScope)
	}
	if pl.ScannedObjects != 502 {
		t.Fatalf("scanned %d", pl.ScannedObjects)
	}
}
