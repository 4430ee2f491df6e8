package execute

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/prune"
)

var (
	b1 = R + "/app/" + C + "/pg/b1"
	b2 = R + "/app/" + C + "/pg/b2"
)

// standard seeds one object in each kind of root (user U, unowned O,
// current R, historical H) and one outside any root, with an orphan
// backup in R and a backup directory in H.
func standard() (*memStore, *cluster) {
	st := newStore()
	st.manifest(R, b1, "Delete", old)
	st.put(b1+"/data", 100, old)
	st.put(U+"/x", 1, old)
	st.put(O+"/ns/c/data", 5, old)
	st.put(H+"/app/"+C+"/pg/h1/data", 7, old)
	st.put("unrelated/x", 1, old)
	return st, newCluster()
}

func defaultOpts() prune.Options {
	return prune.Options{Versioning: prune.VersioningDisabled, VersioningSource: prune.SourceOperatorOverride}
}

func plan(t *testing.T, st *memStore, cl *cluster, opts prune.Options) (prune.Plan, prune.Inventory) {
	t.Helper()
	inv := cl.inventory()
	pl, err := BuildPlan(context.Background(), st, PlanInput{Inventory: inv, Options: opts, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return pl, inv
}

func run(t *testing.T, st *memStore, cl *cluster, pl prune.Plan, inv prune.Inventory, conc int) (Execution, error) {
	t.Helper()
	_, ex, err := Run(context.Background(), pl, inv, Config{Store: st, Inventory: cl, Concurrency: conc, Now: func() time.Time { return now }})
	return ex, err
}

func cand(t *testing.T, pl prune.Plan, typ prune.CandidateType, prefix string) prune.Candidate {
	t.Helper()
	i := find(pl, typ, prefix)
	if i < 0 {
		var have []string
		for _, c := range pl.Candidates {
			have = append(have, fmt.Sprintf("%s %s %s", c.State, c.Type, c.Prefix))
		}
		t.Fatalf("no %s %s in:\n%s", typ, prefix, strings.Join(have, "\n"))
	}
	return pl.Candidates[i]
}

func find(pl prune.Plan, typ prune.CandidateType, prefix string) int {
	for i, c := range pl.Candidates {
		if c.Type == typ && c.Prefix == prefix {
			return i
		}
	}
	return -1
}

func resultFor(ex Execution, prefix string) *Result {
	for i := range ex.Results {
		if ex.Results[i].Prefix == prefix {
			return &ex.Results[i]
		}
	}
	return nil
}

// Root discovery, an orphan volume root, a historical root and an orphan
// backup through the whole pipeline: lazy discovery, dry run, then a real
// prune with its two refreshes.
func TestPipeline_5(t *testing.T) {
	st, cl := standard()
	pl, inv := plan(t, st, cl, defaultOpts())
	if c := pl.VolumeRootCounts; c.Total != 4 || c.Repository != 2 || c.ProtectedUser != 1 || c.Unowned != 1 {
		t.Fatalf("root counts %+v", c)
	}
	if c := cand(t, pl, prune.TypeBackup, b1); c.State != prune.StateOrphan || c.ObjectCount != 2 {
		t.Fatalf("b1 %+v", c)
	}
	if c := cand(t, pl, prune.TypeOrphanVolumeRoot, O); c.State != prune.StateOrphan || c.ObjectCount != 1 {
		t.Fatalf("O %+v", c)
	}
	if c := cand(t, pl, prune.TypeOrphanRepositoryRoot, H); c.State != prune.StateOrphan || !c.DeferredScan {
		t.Fatalf("H %+v", c)
	}
	cand(t, pl, prune.TypeProtectedUserVolume, U)
	// Nothing below the user root U, and only two shallow levels of H.
	for _, c := range st.callsWith("") {
		if strings.Contains(c, U) || strings.Contains(c, "unrelated") || c == "all:"+H {
			t.Fatalf("listed %s; calls %v", c, st.calls)
		}
	}
	if got := st.callsWith("level:" + H); !slices.Equal(got, []string{"level:" + H, "level:" + H + "/app"}) {
		t.Fatalf("H listings %v", got)
	}

	dry := DryRun(pl)
	if o, _, n, _ := dry.Totals(); o != 3 || n != 3 || !resultFor(dry, H).Deferred {
		t.Fatalf("dry run %+v", dry)
	}
	if len(st.callsWith("delete")) != 0 || len(st.callsWith("versioning")) != 0 || cl.refreshes != 0 {
		t.Fatal("a dry run sends no write and refreshes nothing")
	}

	ex, err := run(t, st, cl, pl, inv, 2)
	if err != nil {
		t.Fatalf("%v %+v", err, ex)
	}
	if got := st.keys(); !slices.Equal(got, []string{U + "/x", "unrelated/x"}) {
		t.Fatalf("left %v", got)
	}
	if cl.refreshes != 2 {
		t.Fatalf("%d refreshes, want 2 (execution start and the shared candidate refresh)", cl.refreshes)
	}
	if r := resultFor(ex, H); r == nil || r.ObjectsDeleted != 1 || r.BytesDeleted != 7 {
		t.Fatalf("H result %+v", r)
	}
	// The manifest goes last, in its own batch.
	var order []string
	for _, b := range st.deleted {
		for _, t := range b {
			if strings.HasPrefix(t.Key, b1) {
				order = append(order, t.Key[len(b1)+1:])
			}
		}
	}
	if !slices.Equal(order, []string{"data", prune.DefaultManifestName}) {
		t.Fatalf("b1 delete order %v", order)
	}
	if len(st.callsWith("versioning")) != 0 {
		t.Fatal("an explicit --bucket-versioning never queries versioning")
	}
}

// Blockers, versioning problems and changes seen by the refresh at
// execution start: the run aborts before any delete.
func TestAbortsBeforeAnyDelete_5_6_5_9(t *testing.T) {
	tests := []struct {
		name  string
		setup func(st *memStore, cl *cluster, opts *prune.Options)
		after func(st *memStore, cl *cluster)
		want  string
	}{
		{name: "case53 blocked", setup: func(_ *memStore, cl *cluster, _ *prune.Options) { cl.in.PVCs[0].VolumeName = "" }, want: "execution blocked"},
		{name: "case54 versioned without purge-versions", setup: func(st *memStore, _ *cluster, o *prune.Options) {
			o.Versioning, o.VersioningSource = prune.VersioningEnabled, prune.SourceDetected
		}, want: "--purge-versions"},
		{name: "case55 versioning changed", setup: func(st *memStore, _ *cluster, o *prune.Options) {
			o.Versioning, o.VersioningSource = prune.VersioningDisabled, prune.SourceDetected
		}, after: func(st *memStore, _ *cluster) { st.versioning = "Enabled" }, want: "versioning changed"},
		{name: "case57 Backup created before execution", after: func(_ *memStore, cl *cluster) { cl.addBackup("b1") }, want: "plan is stale"},
		{name: "case63 repo recreated", after: func(_ *memStore, cl *cluster) { cl.in.Repo.UID = "other" }, want: "recreated"},
		{name: "case64 PVC owns O before execution", after: func(_ *memStore, cl *cluster) {
			cl.in.PVCs = append(cl.in.PVCs, prune.PVC{Namespace: "app", Name: "new", UID: strings.TrimPrefix(O, "pvc-"), StorageClassName: "standard"})
		}, want: "now owned by"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, cl := standard()
			opts := defaultOpts()
			if tt.setup != nil {
				tt.setup(st, cl, &opts)
			}
			pl, inv := plan(t, st, cl, opts)
			if tt.after != nil {
				tt.after(st, cl)
			}
			calls := len(st.calls)
			_, err := run(t, st, cl, pl, inv, 4)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
			if len(st.deleted) != 0 {
				t.Fatalf("deleted %v", st.deleted)
			}
			if tt.name == "case53 blocked" && len(st.calls) != calls {
				t.Fatal("a blocked run takes no final snapshot")
			}
		})
	}
}

// Changes seen while candidates run, and a delete error: one candidate
// fails, the others proceed, and the run ends with the count of failures.
func TestPerCandidateFailures_5_11(t *testing.T) {
	tests := []struct {
		name string
		hook func(st *memStore, cl *cluster)
		// failing is the prefix that must fail with want.
		failing, want string
		partial       int
	}{
		{name: "case58 Backup b2 created while b1 re-lists", failing: b2, want: "exists", hook: func(st *memStore, cl *cluster) {
			st.onList = func(call string) {
				if call == "all:"+b1 && cl.refreshes == 1 {
					cl.addBackup("b2")
				}
			}
		}},
		{name: "case59 object added after capture", failing: b1, want: "objects changed", hook: func(st *memStore, cl *cluster) {
			st.onList = func(call string) {
				if call == "all:"+b1 && cl.refreshes == 1 {
					st.put(b1+"/late", 1, old)
				}
			}
		}},
		{name: "case64 PVC owns O after the start refresh", failing: O, want: "now owned by", hook: func(_ *memStore, cl *cluster) {
			cl.onRefresh = func(n int, in *prune.InventoryInput) {
				if n == 2 {
					in.PVCs = append(in.PVCs, prune.PVC{Namespace: "app", Name: "new", UID: strings.TrimPrefix(O, "pvc-"), StorageClassName: "standard"})
				}
			}
		}},
		{name: "case61 AccessDenied on one data key", failing: b1, want: "AccessDenied", partial: 1, hook: func(st *memStore, _ *cluster) {
			st.onDelete = func(batch []prune.DeleteTarget) ([]prune.DeleteTarget, []prune.DeleteFailure, error, bool) {
				if !strings.HasPrefix(batch[0].Key, b1) {
					return nil, nil, nil, false
				}
				return batch[:1], []prune.DeleteFailure{{Key: batch[1].Key, Code: "AccessDenied", Message: "denied"}}, nil, true
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, cl := standard()
			st.manifest(R, b2, "Delete", old)
			st.put(b1+"/data2", 3, old)
			pl, inv := plan(t, st, cl, defaultOpts())
			tt.hook(st, cl)
			ex, err := run(t, st, cl, pl, inv, 1)
			if err == nil || !errors.Is(err, ErrCandidatesFailed) || !strings.HasPrefix(err.Error(), "1 ") {
				t.Fatalf("err %v %+v", err, ex.Results)
			}
			r := resultFor(ex, tt.failing)
			if r == nil || !strings.Contains(r.Error, tt.want) || r.ObjectsDeleted != tt.partial {
				t.Fatalf("result %+v", r)
			}
			if _, _, ok, failed := ex.Totals(); ok != 3 || failed != 1 {
				t.Fatalf("results %+v", ex.Results)
			}
			if cl.refreshes != 2 {
				t.Fatalf("%d refreshes", cl.refreshes)
			}
			if tt.partial > 0 && !slices.Contains(st.keys(), b1+"/"+prune.DefaultManifestName) {
				t.Fatal("a failed data batch must leave the manifest")
			}
		})
	}
}

// A versioned backup deletes data, then the noncurrent manifest version, then
// the current one.
func TestVersionedManifestOrder_7_7(t *testing.T) {
	st := newStore()
	st.versioned, st.versioning = true, "Enabled"
	st.manifest(R, b1, "Delete", old)
	st.put(b1+"/data", 10, old)
	st.manifest(R, b1, "Delete", old)
	cl := newCluster()
	opts := prune.Options{Versioning: prune.VersioningEnabled, VersioningSource: prune.SourceDetected, PurgeVersions: true}
	pl, inv := plan(t, st, cl, opts)
	if c := cand(t, pl, prune.TypeBackup, b1); c.State != prune.StateOrphan || c.ObjectCount != 3 {
		t.Fatalf("b1 %+v", c)
	}
	if _, err := run(t, st, cl, pl, inv, 1); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, b := range st.deleted {
		for _, t := range b {
			order = append(order, t.VersionID)
		}
	}
	if !slices.Equal(order, []string{"v2", "v1", "v3"}) || len(st.keys()) != 0 {
		t.Fatalf("order %v, left %v", order, st.keys())
	}
	if len(st.callsWith("versioning")) != 1 {
		t.Fatal("auto mode re-checks versioning once at execution")
	}
}

// Cancellation schedules no new candidate.
func TestCancellationStopsScheduling_5_11(t *testing.T) {
	st, cl := standard()
	pl, inv := plan(t, st, cl, defaultOpts())
	ctx, cancel := context.WithCancel(context.Background())
	st.onList = func(call string) {
		if call == "all:"+b1 && cl.refreshes == 1 {
			cancel()
		}
	}
	_, ex, err := Run(ctx, pl, inv, Config{Store: st, Inventory: cl, Concurrency: 1, Now: func() time.Time { return now }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if len(ex.Results) != 1 || len(st.deleted) != 0 {
		t.Fatalf("results %+v, deleted %v", ex.Results, st.deleted)
	}
}

// 1001 objects go in batches of 1000 and 1 through the executor, and
// repository strays are deleted first.
func TestBatchesAndStrayOrder(t *testing.T) {
	st, cl := standard()
	for i := range 1001 {
		st.put(fmt.Sprintf("%s/ns/c/k%04d", O, i), 1, old)
	}
	st.put(R+"/loose", 2, old)
	opts := defaultOpts()
	opts.DeleteRepositoryStray = true
	pl, inv := plan(t, st, cl, opts)
	if _, err := run(t, st, cl, pl, inv, 1); err != nil {
		t.Fatal(err)
	}
	if st.deleted[0][0].Key != R+"/loose" {
		t.Fatalf("first delete %v, want the stray", st.deleted[0])
	}
	var sizes []int
	for _, b := range st.deleted {
		if strings.HasPrefix(b[0].Key, O) {
			sizes = append(sizes, len(b))
		}
	}
	if !slices.Equal(sizes, []int{1000, 2}) {
		t.Fatalf("O batches %v", sizes)
	}
}

// A referenced historical root is listed in full and scanned granularly; the
// shallow listing never reaches a candidate.
func TestReferencedHistoricalRootIsListedInFull_3_5(t *testing.T) {
	st, cl := standard()
	cl.in.Backups = append(cl.in.Backups, prune.Backup{Namespace: "app", Name: "y", UID: "uid-y", BackupRepoName: "repo",
		Labels: map[string]string{prune.LabelClusterUID: uuidA}, Path: "/app/" + C + "/pg/y"})
	pl, _ := plan(t, st, cl, defaultOpts())
	if find(pl, prune.TypeOrphanRepositoryRoot, H) >= 0 {
		t.Fatal("H is referenced")
	}
	if c := cand(t, pl, prune.TypeBackup, H+"/app/"+C+"/pg/h1"); c.ObjectCount != 1 {
		t.Fatalf("h1 %+v", c)
	}
	if len(st.callsWith("all:"+H)) != 1 {
		t.Fatalf("calls %v", st.calls)
	}
	// The re-plan after listing H in full reads no manifest a second time.
	gets := st.callsWith("get:")
	seen := map[string]bool{}
	for _, g := range gets {
		if seen[g] {
			t.Fatalf("manifest read twice (%s); reads: %v", g, gets)
		}
		seen[g] = true
	}
	if len(gets) == 0 {
		t.Fatal("no manifest was read: the layout is wrong")
	}
	for _, c := range pl.Candidates {
		for _, o := range c.Objects {
			if o.ETag == "" {
				t.Fatalf("synthetic marker %s reached candidate %s", o.Key, c.Prefix)
			}
		}
	}
}
