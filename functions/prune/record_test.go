package prune

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	engine "github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/execute"
	"github.com/snapflow/snapflow/internal/prune/kubeinv"
	"github.com/snapflow/snapflow/internal/prune/ledger"
	"github.com/snapflow/snapflow/internal/scheme"
)

func TestRunOf(t *testing.T) {
	at := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	p := params{trigger: "tick", mode: "dry-run"}
	blocked := engine.Plan{BlockingReasons: []string{"active restore a/b has an incomplete spec.backup reference"}}
	for _, tc := range []struct {
		name    string
		out     outcome
		planErr error
		want    ledger.Outcome
	}{
		{"no plan", outcome{}, errors.New("read BackupRepo: forbidden"), ledger.Failed},
		{"blockers, plan only", outcome{plan: blocked}, nil, ledger.Blocked},
		{"blockers, execution refused", outcome{plan: blocked, ex: &execute.Execution{}, runErr: engine.ErrExecutionBlocked}, nil, ledger.Blocked},
		{"a guard refused", outcome{ex: &execute.Execution{}, runErr: fmt.Errorf("%w: bucket versioning is Enabled: real deletion requires --purge-versions", engine.ErrUnsafe)}, nil, ledger.Blocked},
		{"the store failed during the final snapshot", outcome{ex: &execute.Execution{}, runErr: errors.New("final snapshot of kb/pvc-1: connection refused")}, nil, ledger.Failed},
		{"a stale plan", outcome{ex: &execute.Execution{}, runErr: fmt.Errorf("%w: bucket changed", engine.ErrStalePlan)}, nil, ledger.Failed},
		{"candidates failed", outcome{ex: &execute.Execution{}, runErr: execute.ErrCandidatesFailed}, nil, ledger.Failed},
		{"plan only", outcome{}, nil, ledger.Planned},
		{"dry run", outcome{ex: &execute.Execution{DryRun: true}}, nil, ledger.DryRun},
		{"pruned", outcome{ex: &execute.Execution{}}, nil, ledger.Pruned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runOf(p, at, tc.out, tc.planErr)
			if r.Outcome != tc.want || !r.At.Equal(at) || r.Trigger != "tick" || r.Kind != ledger.KindPrune {
				t.Fatalf("%+v, want %s", r, tc.want)
			}
			if tc.want == ledger.Blocked && r.Message == "" {
				t.Fatal("a blocked run says nothing about why")
			}
		})
	}
}

// The record is updated per BackupRepo and kind; a BackupRepo that is
// gone leaves it; a missing record is never created (the chart makes it).
func TestRememberKeepsTheLastRunPerRepo(t *testing.T) {
	ctx := context.Background()
	repo := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(kubeinv.GVKBackupRepo)
		u.SetName(name)
		return u
	}
	kc := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(repo("a")).Build()
	f := &Function{Writer: kc, Namespace: "snapflow-system"}
	at := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	key := client.ObjectKey{Namespace: "snapflow-system", Name: ledger.ConfigMap}
	f.remember(ctx, kc, ledger.Run{Repo: "a", Kind: ledger.KindPlan, At: at, Outcome: ledger.Blocked})
	if err := kc.Get(ctx, key, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the function created its record: %v", err)
	}
	if err := kc.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
		t.Fatal(err)
	}
	read := func() ledger.Ledger {
		t.Helper()
		var cm corev1.ConfigMap
		if err := kc.Get(ctx, key, &cm); err != nil {
			t.Fatal(err)
		}
		l, err := ledger.Decode([]byte(cm.Data[ledger.Key]))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	f.remember(ctx, kc, ledger.Run{Repo: "gone", Kind: ledger.KindPlan, At: at, Outcome: ledger.Blocked})
	f.remember(ctx, kc, ledger.Run{Repo: "a", Kind: ledger.KindPlan, At: at.Add(time.Minute), Outcome: ledger.Blocked, Blockers: 1})
	f.remember(ctx, kc, ledger.Run{Repo: "a", Kind: ledger.KindPrune, At: at.Add(2 * time.Minute), Outcome: ledger.DryRun})
	l := read()
	if len(l) != 2 || l["a/plan"].Outcome != ledger.Blocked || l["a/prune"].Outcome != ledger.DryRun {
		t.Fatalf("record %+v, want a's plan Blocked and its dry run", l)
	}
	// Without a writer nothing is recorded, and nothing fails.
	(&Function{}).remember(ctx, kc, ledger.Run{Repo: "a", Kind: ledger.KindPlan, At: at.Add(time.Hour), Outcome: ledger.Planned})
	if l := read(); l["a/plan"].Outcome != ledger.Blocked {
		t.Fatalf("record %+v changed without a writer", l)
	}
}

// Only a run over the deployment's whole scope is recorded.
func TestOnlyWholeRunsAreRecorded(t *testing.T) {
	f := &Function{Settings: Settings{Settings: execute.Settings{Namespace: "app", Prefix: "kb"}}}
	whole := params{run: execute.Settings{Namespace: "app", Prefix: "kb"}}
	if !f.recorded(whole) {
		t.Fatal("a whole run is not recorded")
	}
	for name, p := range map[string]params{
		"one S3 root":       {root: "kb/pvc-1", run: execute.Settings{Namespace: "app", Prefix: "kb"}},
		"a narrower prefix": {run: execute.Settings{Namespace: "app", Prefix: "kb/x"}},
	} {
		if f.recorded(p) {
			t.Errorf("%s is recorded", name)
		}
	}
	shared := &Function{}
	if shared.recorded(params{run: execute.Settings{Namespace: "app"}}) || !shared.recorded(params{}) {
		t.Error("the shared function records a namespace-narrowed request, or not a whole one")
	}
}
