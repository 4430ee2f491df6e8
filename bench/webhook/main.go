// Command webhook measures snapflow's admission latency and throughput over
// TLS on loopback with a realistic SnapshotPolicy, next to a baseline handler
// that allows everything through the same server stack, in one run. The
// results go into docs/benchmarks.md between this benchmark's markers.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/snapflow/snapflow/bench/internal/report"
	"github.com/snapflow/snapflow/internal/certs"
	"github.com/snapflow/snapflow/internal/crdschema"
	"github.com/snapflow/snapflow/internal/validate"
	"github.com/snapflow/snapflow/webhook"
)

type allowAll struct{}

func (allowAll) Handle(context.Context, admission.Request) admission.Response {
	return admission.Allowed("")
}

func main() {
	rate := flag.Int("rate", 1000, "requests per second in the paced run")
	dur := flag.Duration("duration", 10*time.Second, "length of the paced run")
	out := flag.String("out", "docs/benchmarks.md", "results file to update")
	sample := flag.String("policy", "config/samples/20-snapshotpolicy-postgres.yaml", "SnapshotPolicy to admit")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	webhook.TuneGC() // as `snapflow webhook` does at start

	body, err := reviewBody(*sample)
	must(err)
	bundle, err := certs.Apply(certs.Bundle{}, certs.NewCA, certs.Hosts{IPs: []net.IP{net.ParseIP("127.0.0.1")}}, certs.DefaultPolicy, time.Now())
	must(err)
	cert, err := bundle.TLSCertificate()
	must(err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle.CABundle())

	snap := &webhook.Handler{Kind: "SnapshotPolicy", Lookup: validate.NewObjects(), Log: logr.Discard()}
	results := map[string]result{}
	for _, c := range []struct {
		name string
		h    admission.Handler
	}{{"baseline (allow all)", allowAll{}}, {"snapflow validate", snap}} {
		url, stop := serve(&crwebhook.Admission{Handler: c.h}, cert)
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 64}}
		check(client, url, body, c.h == admission.Handler(snap))
		warm(client, url, body)
		r := paced(client, url, body, *rate, *dur)
		r.throughput = closedLoop(client, url, body, 2*runtime.NumCPU(), 5*time.Second)
		results[c.name] = r
		stop()
		fmt.Printf("%-22s p50 %6.3f ms  p99 %6.3f ms  max %6.3f ms  errors %d  closed-loop %6.0f req/s\n",
			c.name, ms(r.p50), ms(r.p99), ms(r.max), r.errors, r.throughput)
	}
	must(writeResults(*out, results, *rate, *dur))
}

type result struct {
	p50, p99, max time.Duration
	errors        int64
	sent          int
	throughput    float64
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// reviewBody wraps the sample, with its schema defaults applied as the API
// server would, in an AdmissionReview CREATE request.
func reviewBody(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	if _, err := crdschema.Apply("SnapshotPolicy", obj); err != nil {
		return nil, err
	}
	review := map[string]any{
		"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
		"request": map[string]any{
			"uid": "bench", "operation": "CREATE", "namespace": "billing", "name": "postgres-data",
			"kind":     map[string]string{"group": "kopiur.home-operations.com", "version": "v1alpha1", "kind": "SnapshotPolicy"},
			"resource": map[string]string{"group": "kopiur.home-operations.com", "version": "v1alpha1", "resource": "snapshotpolicies"},
			"object":   obj,
		},
	}
	return json.Marshal(review)
}

func serve(h http.Handler, cert *tls.Certificate) (string, func()) {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{*cert}})
	must(err)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "https://" + ln.Addr().String(), func() { _ = srv.Close() }
}

func post(c *http.Client, url string, body []byte) (time.Duration, []byte, error) {
	start := time.Now()
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return time.Since(start), buf.Bytes(), err
}

// check makes sure the handler really ran the validator (and allowed the sample).
func check(c *http.Client, url string, body []byte, live bool) {
	_, resp, err := post(c, url, body)
	must(err)
	if !bytes.Contains(resp, []byte(`"allowed":true`)) {
		must(fmt.Errorf("the sample was not allowed: %s", resp))
	}
	if live && len(resp) == 0 {
		must(fmt.Errorf("empty response"))
	}
}

func warm(c *http.Client, url string, body []byte) {
	for i := 0; i < 500; i++ {
		_, _, _ = post(c, url, body)
	}
}

// paced sends rate requests per second for d, each on its own schedule
// (open loop), so a slow response cannot hide latency by slowing the sender.
func paced(c *http.Client, url string, body []byte, rate int, d time.Duration) result {
	n := int(float64(rate) * d.Seconds())
	lat := make([]time.Duration, n)
	var errs atomic.Int64
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := 0; i < n; i++ {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l, _, err := post(c, url, body)
			if err != nil {
				errs.Add(1)
			}
			lat[i] = l
		}(i)
	}
	wg.Wait()
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	return result{p50: lat[n/2], p99: lat[n*99/100], max: lat[n-1], errors: errs.Load(), sent: n}
}

func closedLoop(c *http.Client, url string, body []byte, workers int, d time.Duration) float64 {
	var done atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if _, _, err := post(c, url, body); err == nil {
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(done.Load()) / d.Seconds()
}

func writeResults(path string, rs map[string]result, rate int, d time.Duration) error {
	base, snap := rs["baseline (allow all)"], rs["snapflow validate"]
	var b strings.Builder
	b.WriteString("## Admission webhook latency\n\n")
	fmt.Fprintf(&b, "`go run ./bench/webhook` on %s, %d cores, %s. One run, both handlers behind the same controller-runtime admission stack over TLS on loopback: a baseline that allows everything, and snapflow's validating handler admitting `config/samples/20-snapshotpolicy-postgres.yaml` (hooks, verification with a CEL successExpr, a preflight check, mover settings) with the schema defaults applied. Paced run: %d requests/s for %s, open loop. Closed loop: %d concurrent clients for 5 s. The load generator shares the 2 cores with the server, and the process uses the GC setting `snapflow webhook` applies at start (GOGC 400 with a 192 MiB soft limit).\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.Version(), rate, d, 2*runtime.NumCPU())
	b.WriteString("| handler | p50 | p99 | max | errors | closed-loop throughput |\n|---|---|---|---|---|---|\n")
	for _, name := range []string{"baseline (allow all)", "snapflow validate"} {
		r := rs[name]
		fmt.Fprintf(&b, "| %s | %.3f ms | %.3f ms | %.3f ms | %d of %d | %.0f req/s |\n", name, ms(r.p50), ms(r.p99), ms(r.max), r.errors, r.sent, r.throughput)
	}
	fmt.Fprintf(&b, "\nRatios snapflow / baseline: p50 %.2f×, p99 %.2f×, throughput %.2f×. Target: p99 under 2 ms at 1,000 requests/s — %s.\n",
		ratio(snap.p50, base.p50), ratio(snap.p99, base.p99), snap.throughput/base.throughput, report.Verdict(snap.p99 < 2*time.Millisecond && snap.errors == 0))
	return report.WriteSection(path, "webhook", b.String())
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }
