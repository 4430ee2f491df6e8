// Command retention times GFS selection over 100,000 Snapshots (50 sources,
// one every 47 minutes over nine years, every bucket set) and writes the
// result into docs/benchmarks.md between this benchmark's markers.
package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"time"

	"k8s.io/utils/ptr"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/bench/internal/report"
	"github.com/snapflow/snapflow/internal/retention"
)

func main() {
	cands := make([]retention.Candidate, 100_000)
	start := time.Date(2017, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range cands {
		cands[i] = retention.Candidate{Name: fmt.Sprintf("s-%06d", i), Time: start.Add(time.Duration(i) * 47 * time.Minute), Bucket: fmt.Sprintf("pvc/ns/%d", i%50)}
	}
	r := snapv1.Retention{KeepLatest: ptr.To[int32](10), KeepHourly: ptr.To[int32](24), KeepDaily: ptr.To[int32](14),
		KeepWeekly: ptr.To[int32](8), KeepMonthly: ptr.To[int32](12), KeepAnnual: ptr.To[int32](5)}
	var runs []time.Duration
	var kept int
	for i := 0; i < 7; i++ {
		t0 := time.Now()
		vs := retention.Select(r, cands)
		runs = append(runs, time.Since(t0))
		kept = len(vs) - len(retention.Prune(vs))
	}
	sort.Slice(runs, func(a, b int) bool { return runs[a] < runs[b] })
	med := runs[len(runs)/2]
	fmt.Printf("GFS over %d snapshots: median %s, kept %d\n", len(cands), med, kept)

	body := fmt.Sprintf("## GFS retention selection\n\n`go run ./bench/retention` on %s, %d cores, %s: `retention.Select` over 100,000 Snapshots in 50 buckets with every keep* bucket set, median of 7 runs: **%s** (%d kept). Target: under 100 ms — %s.\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.Version(), med.Round(time.Millisecond), kept, report.Verdict(med < 100*time.Millisecond))
	if err := report.WriteSection("docs/benchmarks.md", "retention", body); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
