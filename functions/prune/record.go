package prune

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/runtime"
	"github.com/snapflow/snapflow/internal/prune/kubeinv"
	"github.com/snapflow/snapflow/internal/prune/ledger"
)

// Record is the ConfigMap, in snapflow's namespace, holding each
// BackupRepo's last prune run (ledger.Key); the exporter serves it as
// snapflow_prune_blocked and snapflow_prune_last_run_timestamp_seconds.
const Record = ledger.ConfigMap

// remember writes run as repo's last one. A failure is only logged: the
// run itself is done, and the record is what the next run rewrites.
func (f *Function) remember(ctx context.Context, kc client.Reader, repo string, run ledger.Run) {
	if f.Writer == nil || f.Namespace == "" {
		return
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
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		err := f.Writer.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: Record}, &cm)
		create := apierrors.IsNotFound(err)
		if err != nil && !create {
			return err
		}
		l, err := ledger.Decode([]byte(cm.Data[ledger.Key]))
		if err != nil {
			l = ledger.Ledger{} // a damaged record is rewritten, not kept
		}
		if !l.Record(repo, run, gone) && !create {
			return nil
		}
		b, err := l.Encode()
		if err != nil {
			return err
		}
		if create {
			cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: Record,
				Labels: map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue}}}
		}
		cm.Data = map[string]string{ledger.Key: string(b)}
		if create {
			err = f.Writer.Create(ctx, &cm)
			if apierrors.IsAlreadyExists(err) {
				// Another run created it meanwhile: read it again.
				return apierrors.NewConflict(corev1.Resource("configmaps"), Record, err)
			}
			return err
		}
		return f.Writer.Update(ctx, &cm)
	})
	if err != nil {
		runtime.Log(ctx).Error(err, "could not record the prune run; the exporter shows the previous one", "record", f.Namespace+"/"+Record)
	}
}

// runOf is what the record keeps of a run.
func runOf(p params, at time.Time, out outcome, planErr error) ledger.Run {
	r := ledger.Run{At: at.UTC(), Trigger: p.trigger, Mode: p.mode}
	blockers := out.plan.BlockingReasons
	switch {
	case planErr != nil:
		r.Outcome, r.Message = ledger.Failed, planErr.Error()
	case len(blockers) > 0:
		r.Outcome, r.Blockers, r.Message = ledger.Blocked, len(blockers), strings.Join(blockers, "; ")
	case out.ex == nil:
		r.Outcome = ledger.Planned
	case out.runErr != nil && retryable(out.runErr):
		r.Outcome, r.Message = ledger.Failed, out.runErr.Error()
	case out.runErr != nil:
		// The final snapshot or a global guard refused the deletion.
		r.Outcome, r.Message = ledger.Blocked, out.runErr.Error()
	case out.ex.DryRun:
		r.Outcome = ledger.DryRun
	default:
		r.Outcome = ledger.Pruned
	}
	return r
}
