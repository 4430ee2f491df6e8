package doctor

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

var now = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

func caPEM(t *testing.T, notBefore, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "snapflow-ca"}, NotBefore: notBefore, NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func allCRDs() []CRD {
	var out []CRD
	for _, r := range Resources {
		out = append(out, CRD{Name: r + "." + snapv1.GroupVersion.Group, Found: true, Established: true, Served: []string{"v1alpha1"}})
	}
	return out
}

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

// healthy is an installation every check passes.
func healthy(t *testing.T) Facts {
	zero := 0
	server := now.Add(2 * time.Second)
	return Facts{
		Now: now, ServerTime: &server, Grace: 5 * time.Minute,
		CRDs:      allCRDs(),
		Webhooks:  []WebhookConfig{{Kind: "ValidatingWebhookConfiguration", Name: "snapflow", CABundles: [][]byte{caPEM(t, now.Add(-time.Hour), now.AddDate(1, 0, 0))}}},
		Probe:     errors.New(`admission webhook "snapshotpolicies.validate.snapflow.dev" denied the request: spec.repository.namespace: ... a Repository ` + ProbeMarker),
		Functions: []Workload{{Kind: "Deployment", Namespace: "snapflow", Name: "snapflow-snapshot", Ready: true, ServiceAccount: "snapflow-snapshot"}},
		Sources:   []Workload{{Kind: "PingSource", Namespace: "snapflow", Name: "snapflow-tick", Ready: true}},
		Repositories: []snapv1.Repository{{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "nas", CreationTimestamp: ago(time.Hour)},
			Status: snapv1.RepositoryStatus{Conditions: []metav1.Condition{{Type: wellknown.ConditionReady, Status: metav1.ConditionTrue}}}}},
		Schedules: []snapv1.SnapshotSchedule{{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "nightly", CreationTimestamp: ago(48 * time.Hour)},
			Status: snapv1.SnapshotScheduleStatus{NextSchedule: &snapv1.ScheduleRef{At: ptr(metav1.NewTime(now.Add(time.Hour)))}}}},
		Snapshots:   []snapv1.Snapshot{{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "fresh", CreationTimestamp: ago(time.Minute)}}},
		Unprotected: &zero,
	}
}

func ptr[T any](v T) *T { return &v }

func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Facts)
		check  string
		want   Status
		detail string // in the check's detail, or its fix
	}{
		{name: "healthy", check: "", want: OK},
		{name: "a missing CRD", change: func(f *Facts) { f.CRDs = f.CRDs[1:] }, check: "crds", want: Fail, detail: "clusterrepositories.kopiur.home-operations.com"},
		{name: "a CRD serving another version only", change: func(f *Facts) { f.CRDs[2].Served = []string{"v1beta1"} }, check: "crds", want: Fail, detail: "not served"},
		{name: "no webhook configuration", change: func(f *Facts) { f.Webhooks = nil }, check: "webhook-ca", want: Fail, detail: "no admission configuration"},
		{name: "an empty caBundle", change: func(f *Facts) { f.Webhooks[0].CABundles = [][]byte{nil} }, check: "webhook-ca", want: Fail, detail: "caBundle is empty"},
		{name: "a caBundle that is not PEM", change: func(f *Facts) { f.Webhooks[0].CABundles = [][]byte{[]byte("garbage")} }, check: "webhook-ca", want: Fail, detail: "no PEM certificate"},
		{name: "an expired CA", change: func(f *Facts) {
			f.Webhooks[0].CABundles = [][]byte{caPEM(t, now.AddDate(-2, 0, 0), now.AddDate(-1, 0, 0))}
		}, check: "webhook-ca", want: Fail, detail: "expired"},
		{name: "a CA about to expire", change: func(f *Facts) {
			f.Webhooks[0].CABundles = [][]byte{caPEM(t, now.AddDate(-1, 0, 0), now.Add(72*time.Hour))}
		}, check: "webhook-ca", want: Warn, detail: "expires in"},
		{name: "the webhook's certificate is not trusted", change: func(f *Facts) {
			f.Probe = errors.New(`Internal error occurred: failed calling webhook "snapshotpolicies.mutate.snapflow.dev": tls: failed to verify certificate: x509: certificate signed by unknown authority`)
		}, check: "webhook", want: Fail, detail: "caBundle does not match"},
		{name: "the webhook is down", change: func(f *Facts) {
			f.Probe = errors.New(`Internal error occurred: failed calling webhook "snapshotpolicies.mutate.snapflow.dev": dial tcp 10.0.0.1:443: connect: connection refused`)
		}, check: "webhook", want: Fail, detail: "cannot reach the webhook"},
		{name: "the webhook never saw the probe", change: func(f *Facts) { f.Probe = nil }, check: "webhook", want: Fail, detail: "did not see it"},
		{name: "the probe was not allowed", change: func(f *Facts) { f.ProbeSkipped = "you may not create SnapshotPolicies" }, check: "webhook", want: Warn, detail: "not probed"},
		{name: "a function down", change: func(f *Facts) {
			f.Functions = append(f.Functions, Workload{Kind: "Knative Service", Namespace: "snapflow", Name: "snapflow-restore", Why: "RevisionMissing"})
		}, check: "functions", want: Fail, detail: "snapflow/snapflow-restore (RevisionMissing)"},
		{name: "no functions in the cluster", change: func(f *Facts) { f.Functions = nil }, check: "functions", want: Warn, detail: "events check"},
		{name: "functions but no source", change: func(f *Facts) { f.Sources = nil }, check: "sources", want: Fail, detail: "nothing sends them events"},
		{name: "a source not ready", change: func(f *Facts) {
			f.Sources = append(f.Sources, Workload{Kind: "ApiServerSource", Namespace: "snapflow", Name: "snapflow-kube", Why: "SinkNotFound"})
		}, check: "sources", want: Fail, detail: "snapflow/snapflow-kube (SinkNotFound)"},
		{name: "a function's account without its binding", change: func(f *Facts) {
			f.Functions[0].RBAC = "no RoleBinding or ClusterRoleBinding names"
		}, check: "rbac", want: Fail, detail: "runs as snapflow-snapshot, which no RoleBinding"},
		{name: "a Snapshot no function picked up", change: func(f *Facts) {
			f.Snapshots = append(f.Snapshots, snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "forgotten", CreationTimestamp: ago(time.Hour)},
				Spec: snapv1.SnapshotSpec{PolicyRef: &snapv1.PolicyRef{Name: "app"}}})
		}, check: "events", want: Fail, detail: "Snapshot apps/forgotten"},
		{name: "a Restore no function picked up", change: func(f *Facts) {
			f.Restores = append(f.Restores, snapv1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "drill", CreationTimestamp: ago(time.Hour)}})
		}, check: "events", want: Fail, detail: "Restore apps/drill"},
		{name: "an overdue schedule", change: func(f *Facts) {
			f.Schedules[0].Status.NextSchedule.At = ptr(metav1.NewTime(now.Add(-2 * time.Hour)))
		}, check: "schedules", want: Fail, detail: "apps/nightly overdue by 120m"},
		{name: "a schedule never handled", change: func(f *Facts) { f.Schedules[0].Status = snapv1.SnapshotScheduleStatus{} }, check: "schedules", want: Fail, detail: "never handled"},
		{name: "a schedule that says why it does not fire", change: func(f *Facts) {
			f.Schedules[0].Status.NextSchedule.At = ptr(metav1.NewTime(now.Add(-2 * time.Hour)))
			f.Schedules[0].Status.Conditions = []metav1.Condition{{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Reason: "PolicyNotFound", Message: "SnapshotPolicy apps/db does not exist"}}
		}, check: "schedules", want: Fail, detail: "apps/nightly: PolicyNotFound: SnapshotPolicy apps/db does not exist"},
		{name: "a Snapshot of no policy is never picked up, by design", change: func(f *Facts) {
			f.Snapshots = append(f.Snapshots, snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "discovered", CreationTimestamp: ago(time.Hour)}})
		}, check: "events", want: OK},
		{name: "another webhook failed", change: func(f *Facts) {
			f.Probe = errors.New(`Internal error occurred: failed calling webhook "validate.kyverno.svc": connection refused`)
		}, check: "webhook", want: Warn, detail: "not by snapflow's webhook"},
		{name: "the webhook admits on failure and did not refuse", change: func(f *Facts) { f.Probe, f.ProbeIgnored = nil, true }, check: "webhook", want: Fail, detail: "failurePolicy is Ignore"},
		{name: "a suspended schedule is not late", change: func(f *Facts) {
			f.Schedules[0].Status = snapv1.SnapshotScheduleStatus{}
			f.Schedules[0].Spec.Schedule.Suspend = true
		}, check: "schedules", want: OK},
		{name: "a repository that cannot connect", change: func(f *Facts) {
			f.Repositories[0].Status.Conditions = []metav1.Condition{{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Message: "invalid repository password"}}
		}, check: "repositories", want: Fail, detail: "Repository apps/nas: invalid repository password"},
		{name: "a new repository still connecting", change: func(f *Facts) {
			f.Repositories[0].CreationTimestamp = ago(time.Minute)
			f.Repositories[0].Status.Conditions = nil
		}, check: "repositories", want: Warn, detail: "still connecting"},
		{name: "a skewed clock", change: func(f *Facts) { f.ServerTime = ptr(now.Add(-2 * time.Minute)) }, check: "clock", want: Warn, detail: "2m0s off"},
		{name: "objects the user may not read", change: func(f *Facts) { f.Unread = []string{"ClusterRepositories in every namespace"} }, check: "access", want: Warn, detail: "not judged: ClusterRepositories"},
		{name: "webhook configurations the user may not read", change: func(f *Facts) { f.WebhooksSkipped = "forbidden" }, check: "webhook-ca", want: Warn, detail: "not read: forbidden"},
		{name: "unprotected PVCs", change: func(f *Facts) { f.Unprotected = ptr(3) }, check: "coverage", want: Warn, detail: "3 PVC(s)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := healthy(t)
			if tc.change != nil {
				tc.change(&f)
			}
			rep := Run(f)
			failed, warned := 0, 0
			for _, c := range rep.Checks {
				switch {
				case c.Name == tc.check:
					if c.Status != tc.want || !strings.Contains(c.Detail+" "+c.Fix, tc.detail) {
						t.Errorf("%s: %s %q (fix %q), want %s with %q", c.Name, c.Status, c.Detail, c.Fix, tc.want, tc.detail)
					}
					if c.Status != OK && c.Fix == "" && c.Name != "repositories" {
						t.Errorf("%s: %s without a fix", c.Name, c.Status)
					}
				case c.Status != OK:
					t.Errorf("%s: %s %q, want OK (only %s changed)", c.Name, c.Status, c.Detail, tc.check)
				}
				switch c.Status {
				case Fail:
					failed++
				case Warn:
					warned++
				}
			}
			if rep.Failed != failed || rep.Warned != warned {
				t.Errorf("counts %d failed %d warned, checks say %d and %d", rep.Failed, rep.Warned, failed, warned)
			}
		})
	}
}
