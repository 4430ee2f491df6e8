package prune

import (
	"context"
	"errors"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/functions/host"
	engine "github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/kubeinv"
	"github.com/snapflow/snapflow/internal/prune/ledger"
)

// RecordWriter is all the function may do to the record.
type RecordWriter interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
	Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error
}

// remember writes run as the last of its BackupRepo and kind. A failure
// is only logged: the run itself is done, and the next one rewrites it.
func (f *Function) remember(ctx context.Context, kc client.Reader, run ledger.Run) {
	if f.Writer == nil || f.Namespace == "" {
		return
	}
	name := f.Record
	if name == "" {
		name = ledger.ConfigMap
	}
	// A run that timed out is recorded too.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	// Whether a recorded BackupRepo is gone is asked of the cluster the
	// prune reads, once per write.
	gone := func(name string) bool {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(kubeinv.GVKBackupRepo)
		return apierrors.IsNotFound(kc.Get(ctx, client.ObjectKey{Name: name}, u))
	}
	log := host.Log(ctx).WithValues("record", f.Namespace+"/"+name)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		if err := f.Writer.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: name}, &cm); err != nil {
			return err
		}
		l, err := ledger.Decode([]byte(cm.Data[ledger.Key]))
		if err != nil {
			log.Info("the prune record was unreadable and is rewritten", "error", err.Error())
			l = ledger.Ledger{}
		}
		if !l.Record(run, gone) {
			return nil
		}
		b, err := l.Encode()
		if err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[ledger.Key] = string(b)
		return f.Writer.Update(ctx, &cm)
	})
	switch {
	case apierrors.IsNotFound(err):
		log.Error(err, "the prune record is missing, so the exporter cannot show this run: create the ConfigMap (the chart does, with prune.function.enabled)")
	case err != nil:
		log.Error(err, "could not record the prune run; the exporter shows the previous one")
	}
}

// recorded says whether a run covers the deployment's whole scope: a run
// of one S3 root, or a request narrowed to a namespace or prefix, sees
// less, and must not clear what a whole run found.
func (f *Function) recorded(p params) bool {
	return p.root == "" && p.run.Namespace == f.Settings.Namespace && engine.CleanKey(p.run.Prefix) == engine.CleanKey(f.Settings.Prefix)
}

// runOf is what the record keeps of a run.
func runOf(p params, at time.Time, out outcome, planErr error) ledger.Run {
	r := ledger.Run{Repo: p.run.BackupRepo, Kind: ledger.KindPrune, At: at.UTC(), Trigger: p.trigger}
	if p.mode == modePlan {
		r.Kind = ledger.KindPlan
	}
	blockers := out.plan.BlockingReasons
	switch {
	case planErr != nil:
		r.Outcome, r.Message = ledger.Failed, planErr.Error()
	case len(blockers) > 0:
		r.Outcome, r.Blockers, r.Message = ledger.Blocked, len(blockers), strings.Join(blockers, "; ")
	case out.ex == nil:
		r.Outcome = ledger.Planned
	case errors.Is(out.runErr, engine.ErrExecutionBlocked) || errors.Is(out.runErr, engine.ErrUnsafe):
		// The final snapshot or a global guard refused to delete.
		r.Outcome, r.Message = ledger.Blocked, out.runErr.Error()
	case out.runErr != nil:
		// A store or cluster error: a retry may succeed.
		r.Outcome, r.Message = ledger.Failed, out.runErr.Error()
	case out.ex.DryRun:
		r.Outcome = ledger.DryRun
	default:
		r.Outcome = ledger.Pruned
	}
	return r
}
