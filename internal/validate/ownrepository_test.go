package validate

import (
	"strings"
	"testing"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

func TestForeignRepositories(t *testing.T) {
	repo := func(ns string) snapv1.RepositoryRef {
		return snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "nas", Namespace: ns}
	}
	pol := func(refs ...snapv1.RepositoryRef) *snapv1.SnapshotPolicySpec {
		if len(refs) == 1 {
			return &snapv1.SnapshotPolicySpec{Repository: &refs[0]}
		}
		return &snapv1.SnapshotPolicySpec{Repositories: refs}
	}
	cluster := snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "shared"}
	cases := []struct {
		name      string
		ns        string
		prev, cur RepositoryRefs
		wantErr   string // a path the refusal names
		wantWarn  string
	}{
		{name: "own namespace implied", ns: "billing", cur: PolicyRepositoryRefs(pol(repo("")))},
		{name: "own namespace spelled out", ns: "billing", cur: PolicyRepositoryRefs(pol(repo("billing")))},
		{name: "a ClusterRepository", ns: "billing", cur: PolicyRepositoryRefs(pol(cluster))},
		{name: "another namespace's Repository", ns: "billing", cur: PolicyRepositoryRefs(pol(repo("payroll"))), wantErr: "spec.repository.namespace"},
		{name: "kind left to its default", ns: "billing", cur: SingleRepositoryRef(&snapv1.RepositoryRef{Name: "nas", Namespace: "payroll"}), wantErr: "spec.repository.namespace"},
		{name: "one fan-out member of another namespace", ns: "billing", cur: PolicyRepositoryRefs(pol(cluster, repo("payroll"))), wantErr: "spec.repositories[1].namespace"},
		{name: "stored before the rule and unchanged: warned", ns: "billing", prev: PolicyRepositoryRefs(pol(repo("payroll"))), cur: PolicyRepositoryRefs(pol(repo("payroll"))), wantWarn: "was stored with it"},
		{name: "an unchanged entry moved to another index: warned", ns: "billing", prev: PolicyRepositoryRefs(pol(cluster, repo("payroll"))), cur: PolicyRepositoryRefs(pol(repo("payroll"))), wantWarn: "was stored with it"},
		{name: "changed to another namespace: refused", ns: "billing", prev: PolicyRepositoryRefs(pol(repo("payroll"))), cur: PolicyRepositoryRefs(pol(repo("hr"))), wantErr: "spec.repository.namespace"},
		{name: "offline, namespace unknown: not judged", ns: "", cur: PolicyRepositoryRefs(pol(repo("payroll")))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ForeignRepositories("SnapshotPolicy", tc.ns, tc.prev, tc.cur)
			switch {
			case tc.wantErr == "" && !r.OK():
				t.Fatalf("refused: %v", r.Errs)
			case tc.wantErr != "" && r.OK():
				t.Fatal("admitted, want a refusal")
			case tc.wantErr != "":
				msg := r.Errs.Error()
				for _, want := range []string{tc.wantErr, `"payroll"`, "ClusterRepository", "remove namespace"} {
					if !strings.Contains(msg, want) && !(want == `"payroll"` && strings.Contains(msg, `"hr"`)) {
						t.Errorf("refusal %q does not mention %q", msg, want)
					}
				}
			}
			warned := strings.Join(r.Warnings, "\n")
			if (tc.wantWarn == "") != (warned == "") || !strings.Contains(warned, tc.wantWarn) {
				t.Errorf("warnings %q, want %q", warned, tc.wantWarn)
			}
		})
	}
}
