package restore

import (
	"context"
	"errors"
	"fmt"

	authzv1 "k8s.io/api/authorization/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/functions/snapshot"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/validate"
)

// StreamExecOff explains a streamExec target in an installation without
// pods/exec for the restore function.
const StreamExecOff = "streamExec restores are off in this installation: the mover pipes the data through pods/exec, which snapflow may grant a run only when the operator sets the chart value functions.snapshot.workloadExecHooks=true (flag --workload-exec-hooks); meanwhile restore into a pvc target and load it from there"

// streamRefused says why a streamExec restore may not run ("" when it
// may): the installation must allow it, and the user who wrote the target
// must be allowed to exec into the namespace's pods, as the data is piped
// into a command with their rights.
func (f *Function) streamRefused(ctx context.Context, rs *snapv1.Restore) (string, error) {
	if !f.WorkloadExec {
		return StreamExecOff, nil
	}
	a, err := validate.ParseRestoreAuthor(rs)
	if err != nil {
		return "not run: " + err.Error(), nil
	}
	if a.InstallAccount(f.Namespace) {
		return fmt.Sprintf("not run: the Restore was written by %s, an account of snapflow itself, whose rights are never lent; apply the Restore yourself", a.Username), nil
	}
	err = host.Review(ctx, f.Access, authzv1.SubjectAccessReviewSpec{User: a.Username, UID: a.UID, Groups: a.Groups},
		authzv1.ResourceAttributes{Namespace: rs.Namespace, Verb: "create", Resource: "pods", Subresource: "exec"})
	if errors.Is(err, host.ErrForbidden) {
		return fmt.Sprintf("not run: a streamExec restore acts with the rights of the user who wrote it (%s), and %v", a.Username, err), nil
	}
	return "", err
}

// streamTarget resolves a streamExec target to the pod its command runs
// in; a reason says why the restore waits.
func (f *Function) streamTarget(ctx context.Context, rs *snapv1.Restore) (*targetPlan, string, string, error) {
	t := rs.Spec.Target.StreamExec
	pod, ctr, why, err := snapshot.WorkloadPod(ctx, f.Client, rs.Namespace, t.PodSelector, t.Container)
	if err != nil {
		return nil, "", "", err
	}
	if why != "" {
		return nil, ReasonTargetNotFound, why + "; the restore starts once one runs", nil
	}
	timeout, err := mover.ExecTimeoutSeconds(t.Timeout)
	if err != nil {
		return nil, ReasonTargetConflict, fmt.Sprintf("spec.target.streamExec.timeout %q: %v", t.Timeout, err), nil
	}
	exec := &mover.ExecWork{Namespace: rs.Namespace, Pod: pod, Container: ctr, Command: t.Command, TimeoutSeconds: timeout}
	return &targetPlan{exec: exec}, "", "", nil
}
