package repository

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/validate"
)

// AccessProblem says why namespace ns may not read or delete data in ref
// (validate.DataAccess on the live objects), or "" when it may.
func AccessProblem(ctx context.Context, c client.Client, ns string, ref snapv1.RepositoryRef) string {
	res := validate.DataAccess(ctx, Lookup{Reader: c}, ns, ref)
	if res.OK() {
		return ""
	}
	return res.Errs.Error()
}

// TenancyProblem says why namespace ns may not use ref, or "" when it may.
func TenancyProblem(ctx context.Context, c client.Client, ns string, ref snapv1.RepositoryRef) string {
	res := validate.Tenancy(ctx, Lookup{Reader: c}, ns, &ref)
	if res.OK() {
		return ""
	}
	return res.Errs.Error()
}

// ProjectionEnabled reads a spec.credentialProjection.
func ProjectionEnabled(c *snapv1.CredentialProjection) bool { return c != nil && c.Enabled }

// ProjectionRefused explains why a run in namespace ns may not have the
// repository's credentials copied there; empty when nothing needs copying,
// or when both sides consent. Only a ClusterRepository is ever copied from:
// its owner opts in with an annotation and limits who may use it through
// allowedNamespaces (checked separately), and the run's owner opts in
// through spec.credentialProjection (enabled; fix names where). A namespaced
// Repository's Secrets belong to its namespace and are never copied out.
func ProjectionRefused(repo *Object, ns string, enabled bool, fix string) string {
	away := repo.Homes().Elsewhere(ns)
	if len(away) == 0 {
		return ""
	}
	where := strings.Join(away, ", ")
	if repo.Ref.Kind != snapv1.KindClusterRepository {
		return fmt.Sprintf("%s keeps its credentials in namespace %s, which a mover in namespace %s cannot read, and a Repository's Secrets are never copied out of its namespace; back up into a Repository in %s, or a ClusterRepository that allows it",
			repo.Key(), where, ns, ns)
	}
	if repo.Obj.GetAnnotations()[wellknown.AnnotationAllowCredentialProjection] != "true" {
		return fmt.Sprintf("%s keeps its credentials in namespace %s, which a mover in namespace %s cannot read, and its owner has not allowed copying them (annotation %s: \"true\" on the ClusterRepository)",
			repo.Key(), where, ns, wellknown.AnnotationAllowCredentialProjection)
	}
	if !enabled {
		return fmt.Sprintf("%s keeps its credentials in namespace %s, which a mover in namespace %s cannot read; set spec.credentialProjection.enabled: true on %s to copy them into %s for each run (the copies are deleted when the run ends)",
			repo.Key(), where, ns, fix, ns)
	}
	return ""
}

// CopyRefused is ProjectionRefused for copies made after the run's first
// start (a pin, a verification), which also re-checks that the repository
// still admits ns: consent is taken as it stands now, not as it was.
func CopyRefused(ctx context.Context, c client.Client, repo *Object, ns string, enabled bool, fix string) string {
	if !repo.Homes().Needed(ns) {
		return ""
	}
	if msg := TenancyProblem(ctx, c, ns, repo.Ref); msg != "" {
		return msg
	}
	return ProjectionRefused(repo, ns, enabled, fix)
}
