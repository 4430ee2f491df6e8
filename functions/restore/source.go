package restore

import (
	"context"
	"errors"
	"fmt"

	authzv1 "k8s.io/api/authorization/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/internal/validate"
)

// sourceRefused says why a Restore may not read its source in another
// namespace ("" when it may, or when its source is its own namespace's):
// the function reads there with its own rights, so the user who wrote the
// Restore must be allowed to read what it names, or anyone who may create
// a Restore could learn of, and restore, another namespace's backups.
func (f *Function) sourceRefused(ctx context.Context, rs *snapv1.Restore) (string, error) {
	src := validate.ForeignRestoreSource(rs)
	if src == nil {
		return "", nil
	}
	// A refusal ends the Restore (Failed), so each one says to make it anew.
	a, err := validate.ParseRestoreAuthor(rs)
	if err != nil {
		return fmt.Sprintf("not run: this Restore reads a source in namespace %s, which it may do only with the rights of the user who wrote it, and it records no such user (%s is set by admission; a Restore made before snapflow recorded it has none); delete the Restore and create it again", src.Namespace, wellknown.AnnotationExecAuthor), nil
	}
	if a.InstallAccount(f.Namespace) {
		return fmt.Sprintf("not run: the Restore was written by %s, an account of snapflow itself, whose rights are never lent; delete it and create it yourself", a.Username), nil
	}
	user := authzv1.SubjectAccessReviewSpec{User: a.Username, UID: a.UID, Groups: a.Groups}
	group := snapv1.GroupVersion.Group
	reads := []authzv1.ResourceAttributes{{Namespace: src.Namespace, Verb: "get", Group: group, Resource: "snapshots", Name: src.Name}}
	what := fmt.Sprintf("Snapshot %s/%s", src.Namespace, src.Name)
	if src.Policy {
		// A fromPolicy restore reads the policy and picks among its Snapshots.
		reads = []authzv1.ResourceAttributes{
			{Namespace: src.Namespace, Verb: "get", Group: group, Resource: "snapshotpolicies", Name: src.Name},
			{Namespace: src.Namespace, Verb: "list", Group: group, Resource: "snapshots"},
		}
		what = fmt.Sprintf("SnapshotPolicy %s/%s and its Snapshots", src.Namespace, src.Name)
	}
	for _, attrs := range reads {
		err := host.Review(ctx, f.Access, user, attrs)
		if errors.Is(err, host.ErrForbidden) {
			return fmt.Sprintf("not run: this Restore reads %s in another namespace, which it may do only while the user who wrote it (%s) may read them, and %v; once that user may, delete the Restore and create it again, or restore from a Snapshot of namespace %s", what, a.Username, err, rs.Namespace), nil
		}
		if err != nil {
			return "", err
		}
	}
	return "", nil
}
