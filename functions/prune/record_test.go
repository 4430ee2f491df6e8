package prune

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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
		{"a guard refused", outcome{ex: &execute.Execution{}, runErr: fmt.Errorf("%w: too many candidates", engine.ErrExecutionBlocked)}, nil, ledger.Blocked},
		{"a stale plan", outcome{ex: &execute.Execution{}, runErr: fmt.Errorf("%w: bucket changed", engine.ErrStalePlan)}, nil, ledger.Failed},
		{"candidates failed", outcome{ex: &execute.Execution{}, runErr: execute.ErrCandidatesFailed}, nil, ledger.Failed},
		{"plan only", outcome{}, nil, ledger.Planned},
		{"dry run", outcome{ex: &execute.Execution{DryRun: true}}, nil, ledger.DryRun},
		{"pruned", outcome{ex: &execute.Execution{}}, nil, ledger.Pruned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runOf(p, at, tc.out, tc.planErr)
			if r.Outcome != tc.want || !r.At.Equal(at) || r.Trigger != "tick" {
				t.Fatalf("%+v, want %s", r, tc.want)
			}
			if tc.want == ledger.Blocked && r.Message == "" {
				t.Fatal("a blocked run says nothing about why")
			}
		})
	}
}

// The record is created, then updated, and a BackupRepo that is gone
// leaves it.
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
	read := func() ledger.Ledger {
		t.Helper()
		var cm corev1.ConfigMap
		if err := kc.Get(ctx, client.ObjectKey{Namespace: "snapflow-system", Name: Record}, &cm); err != nil {
			t.Fatal(err)
		}
		l, err := ledger.Decode([]byte(cm.Data[ledger.Key]))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	f.remember(ctx, kc, "gone", ledger.Run{At: at, Outcome: ledger.Blocked})
	f.remember(ctx, kc, "a", ledger.Run{At: at.Add(time.Minute), Outcome: ledger.Blocked, Blockers: 1})
	if l := read(); len(l) != 1 || l["a"].Outcome != ledger.Blocked {
		t.Fatalf("record %+v, want only a, Blocked", l)
	}
	f.remember(ctx, kc, "a", ledger.Run{At: at.Add(2 * time.Minute), Outcome: ledger.DryRun})
	if l := read(); l["a"].Outcome != ledger.DryRun {
		t.Fatalf("record %+v, want a DryRun", l)
	}
	// Without a writer nothing is recorded, and nothing fails.
	(&Function{}).remember(ctx, kc, "a", ledger.Run{At: at.Add(time.Hour), Outcome: ledger.Failed})
	if l := read(); l["a"].Outcome != ledger.DryRun {
		t.Fatalf("record %+v changed without a writer", l)
	}
}
