package prune

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// The path index finds what a pass over every live Backup finds: the first
// one with a path overlapping the prefix.
func TestPathIndexMatchesLinearScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	segs := []string{"a", "b", "a-b", "a.b", "ab", "a0"}
	path := func() string {
		var ps []string
		for range rng.IntN(4) {
			ps = append(ps, segs[rng.IntN(len(segs))])
		}
		return strings.Join(ps, "/")
	}
	for range 2000 {
		paths := make([][]string, rng.IntN(6))
		for i := range paths {
			for range rng.IntN(3) {
				paths[i] = append(paths[i], path())
			}
		}
		x := newPathIndex(paths)
		for range 20 {
			prefix := path()
			want, found := -1, false
			for i, ps := range paths {
				for _, p := range ps {
					if !found && Overlaps(p, prefix) {
						want, found = i, true
					}
				}
			}
			got, ok := x.overlapping(prefix)
			if ok != found || found && got != want {
				t.Fatalf("paths %q prefix %q: got %d %v, want %d %v", paths, prefix, got, ok, want, found)
			}
		}
	}
}
