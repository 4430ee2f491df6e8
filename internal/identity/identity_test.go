package identity

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

func TestComponentProblem(t *testing.T) {
	tests := map[string]string{
		"postgres-data":           "",
		"billing.prod":            "",
		"ünïcode/with.dots-and_x": "",
		"":                        "must not be empty",
		"a@b":                     "'@'",
		"a:b":                     "':'",
		"a b":                     "whitespace",
		"a\tb":                    "whitespace",
		"a\x01b":                  "control characters",
		strings.Repeat("x", 254):  "at most 253 bytes",
	}
	for in, want := range tests {
		got := ComponentProblem(in)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("ComponentProblem(%q) = %q, want %q", in, got, want)
		}
	}
	if SourcePathProblem("/my data: 2026") != "" || SourcePathProblem("") == "" || SourcePathProblem("/a\nb") == "" {
		t.Error("SourcePathProblem")
	}
}

func TestResolve(t *testing.T) {
	policy := func(id *snapv1.PolicyIdentity) *snapv1.SnapshotPolicy {
		return &snapv1.SnapshotPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: "billing", Labels: map[string]string{"team": "payments"}},
			Spec:       snapv1.SnapshotPolicySpec{Identity: id},
		}
	}
	tests := []struct {
		name     string
		p        *snapv1.SnapshotPolicy
		defaults *snapv1.IdentityDefaults
		want     string
		err      string
	}{
		{"defaults", policy(nil), nil, "pg@billing", ""},
		{"cluster suffix", policy(nil), &snapv1.IdentityDefaults{Cluster: "eu1"}, "pg@billing.eu1", ""},
		{"explicit wins", policy(&snapv1.PolicyIdentity{Username: "u", Hostname: "h"}), &snapv1.IdentityDefaults{Cluster: "eu1", UsernameExpr: "'x'"}, "u@h", ""},
		{"expressions", policy(nil), &snapv1.IdentityDefaults{Cluster: "eu1", UsernameExpr: "labels['team'] + '-' + policyName", HostnameExpr: "namespace + '.' + cluster"}, "payments-pg@billing.eu1", ""},
		{"expression yields a bad component", policy(nil), &snapv1.IdentityDefaults{UsernameExpr: "'a@b'"}, "", "resolved username \"a@b\""},
		{"expression fails", policy(nil), &snapv1.IdentityDefaults{UsernameExpr: "labels['missing']"}, "", "identityDefaults.usernameExpr"},
	}
	for _, tc := range tests {
		got, err := Resolve(tc.p, tc.defaults)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("%s: got %s, %v; want %s", tc.name, got, err, tc.want)
		}
	}
}
