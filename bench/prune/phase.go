package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/execute"
	"github.com/snapflow/snapflow/internal/prune/s3store"
)

// Static credentials for the benchmark server, which does not check them.
const (
	accessKey = "BENCHACCESSKEY01"
	secretKey = "bench-secret-key-not-checked"
	region    = "us-east-1"
)

// phaseResult is what a child process reports on stdout.
type phaseResult struct {
	Wall    time.Duration `json:"wall"`
	Objects int64         `json:"objects"`
	Bytes   int64         `json:"bytes"`
	Pages   int64         `json:"pages"`
	// PeakKiB is the child's own high-water RSS in KiB, read from /proc as a
	// cross-check of the rusage the driver reads.
	PeakKiB int64 `json:"vmHWM"`
	// TotalAlloc is the bytes the Go heap allocated over the phase.
	TotalAlloc uint64 `json:"totalAlloc"`

	// Plan phase only.
	Stats          s3store.Stats       `json:"stats"`
	ListAllCalls   int                 `json:"listAllCalls"`
	ListLevelCalls int                 `json:"listLevelCalls"`
	ManifestReads  int                 `json:"manifestReads"`
	DistinctReads  int                 `json:"distinctReads"`
	Candidates     map[string]int      `json:"candidates"`
	BackupStates   map[prune.State]int `json:"backupStates"`
	ExpectStates   map[prune.State]int `json:"expectStates"`
	Scanned        int64               `json:"scanned"`
	Eligible       int64               `json:"eligible"`
	EligibleBytes  int64               `json:"eligibleBytes"`
	Blockers       []string            `json:"blockers"`
}

func vmHWM() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// rawClient is an SDK client configured the way s3store.New configures its
// own, so the raw pass and the planner pay the same per-request costs.
func rawClient(endpoint string) *s3.Client {
	httpClient := &http.Client{Transport: awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}).GetTransport()}
	return s3.New(s3.Options{
		Region: region, UsePathStyle: true, BaseEndpoint: aws.String(endpoint), HTTPClient: httpClient,
		Credentials:                aws.NewCredentialsCache(s3store.Static(accessKey, secretKey, "")),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

// rawPhase is one recursive ListObjectsV2 pass over the whole bucket that
// only counts what it sees.
func rawPhase(ctx context.Context, endpoint, bucketName string) (phaseResult, error) {
	cli := rawClient(endpoint)
	var r phaseResult
	start := time.Now()
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucketName)}
	for {
		out, err := cli.ListObjectsV2(ctx, in)
		if err != nil {
			return r, err
		}
		r.Pages++
		for _, o := range out.Contents {
			r.Objects++
			r.Bytes += aws.ToInt64(o.Size)
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		in.ContinuationToken = out.NextContinuationToken
	}
	r.Wall = time.Since(start)
	return r, nil
}

// countingStore is the real adapter with call counters around it, like the
// CLI's progress wrapper: it shows whether a manifest is read twice.
type countingStore struct {
	*s3store.Store
	mu               sync.Mutex
	listAll, listLvl int
	reads            map[string]int
}

func (s *countingStore) ListLevel(ctx context.Context, p string, versions bool) ([]prune.Object, []string, error) {
	objs, dirs, err := s.Store.ListLevel(ctx, p, versions)
	s.mu.Lock()
	s.listLvl++
	s.mu.Unlock()
	return objs, dirs, err
}

func (s *countingStore) ListAll(ctx context.Context, p string, versions bool) ([]prune.Object, error) {
	objs, err := s.Store.ListAll(ctx, p, versions)
	s.mu.Lock()
	s.listAll++
	s.mu.Unlock()
	return objs, err
}

func (s *countingStore) WalkAll(ctx context.Context, p string, versions bool, fn func([]prune.Object) error) error {
	err := s.Store.WalkAll(ctx, p, versions, fn)
	s.mu.Lock()
	s.listAll++
	s.mu.Unlock()
	return err
}

func (s *countingStore) ReadManifest(ctx context.Context, key, versionID string) ([]byte, error) {
	data, err := s.Store.ReadManifest(ctx, key, versionID)
	s.mu.Lock()
	s.reads[key]++
	s.mu.Unlock()
	return data, err
}

// planPhase builds the plan the way `snapflow prune plan` does: inventory,
// store, versioning query (--bucket-versioning=auto), discovery scan and
// classification through execute.BuildPlan.
func planPhase(ctx context.Context, p params, endpoint string) (phaseResult, error) {
	l := buildLayout(p, false)
	input, expect := l.input, l.expect
	l = nil
	runtime.GC()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)

	var r phaseResult
	start := time.Now()
	inv := prune.BuildInventory(input)
	st, err := s3store.New(s3store.Config{Bucket: p.Bucket, Endpoint: endpoint, Region: region, PathStyle: true,
		Credentials: s3store.Static(accessKey, secretKey, "")})
	if err != nil {
		return r, err
	}
	store := &countingStore{Store: st, reads: map[string]int{}}
	detected, err := st.BucketVersioning(ctx)
	if err != nil {
		return r, err
	}
	opts := prune.Options{ManifestName: prune.DefaultManifestName, MinAge: prune.DefaultMinAge}
	if opts.Versioning, opts.VersioningSource, err = prune.ResolveVersioning(prune.ModeAuto, detected); err != nil {
		return r, err
	}
	pl, err := execute.BuildPlan(ctx, store, execute.PlanInput{Inventory: inv, Options: opts, Now: p.Now})
	if err != nil {
		return r, err
	}
	r.Wall = time.Since(start)

	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	r.TotalAlloc = ms1.TotalAlloc - ms0.TotalAlloc
	r.Stats = st.Stats()
	r.ListAllCalls, r.ListLevelCalls = store.listAll, store.listLvl
	r.DistinctReads = len(store.reads)
	for _, n := range store.reads {
		r.ManifestReads += n
	}
	r.Candidates = map[string]int{}
	r.BackupStates = map[prune.State]int{}
	for _, c := range pl.Candidates {
		r.Candidates[string(c.Type)+"/"+string(c.State)]++
		if c.Type == prune.TypeBackup {
			r.BackupStates[c.State]++
		}
	}
	r.ExpectStates = expect
	r.Scanned, r.Eligible, r.EligibleBytes = pl.ScannedObjects, pl.DeleteObjects, pl.DeleteBytes
	r.Blockers = pl.BlockingReasons
	r.PeakKiB = vmHWM()
	runtime.KeepAlive(pl)
	return r, nil
}

// runPhase is the entry point of a child process. With profile set, the
// child writes a CPU profile of the phase and a heap profile at its end.
func runPhase(name string, p params, endpoint, profile string) error {
	ctx := context.Background()
	if profile != "" {
		f, err := os.Create(profile + "-" + name + ".cpu")
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			if h, err := os.Create(profile + "-" + name + ".heap"); err == nil {
				_ = pprof.Lookup("heap").WriteTo(h, 0)
				_ = h.Close()
			}
		}()
	}
	var r phaseResult
	var err error
	switch name {
	case "raw":
		r, err = rawPhase(ctx, endpoint, p.Bucket)
		r.PeakKiB = vmHWM()
	case "plan":
		r, err = planPhase(ctx, p, endpoint)
	default:
		err = errors.New("unknown phase " + name)
	}
	if err != nil {
		return fmt.Errorf("phase %s: %w", name, err)
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}
