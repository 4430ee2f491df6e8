package expr

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		kind *Kind
		src  string
		want string // "" = accepted
	}{
		{Success, "stats.files > 0 && stats.errors == 0", ""},
		{Success, "tier == 'deep' ? restored.checksumMatches : stats.files > 0", ""},
		{Success, "snapshot.id != ''", ""},
		{Success, "restored.checksumMatches", ""}, // quick has no restored keys: tolerated
		{Success, "stat.files > 0", "(available variables: stats, snapshot, restored, tier)"},
		{Success, "stats.files", "must return a bool, got int"},
		{Success, "stats.files >", "failed to compile"},
		{Success, "", "is empty"},
		{Success, strings.Repeat("true && ", 200) + "true", "at most 1024"},
		{Success, "snapshot.id + 1 > 0", "failed to evaluate"},
		{Preflight, "repository.ready && repository.indexBlobCount < 1000", ""},
		{Preflight, "maintenance.hasRun || maintenance.lastSuccessAgeSeconds < 86400", ""},
		{Preflight, "stats.files > 0", "undeclared reference to 'stats'"},
		{Preflight, "repository.phase", "must return a bool, got string"},
		{Identity, "namespace + '.' + cluster", ""},
		{Identity, "'labels' in labels ? labels['team'] : policyName", ""},
		{Identity, "namespace == 'x'", "must return a string, got bool"},
		{Identity, "tier", "undeclared reference to 'tier'"},
		{Identity, "'namespace: ' + namespace", ""},
		{Identity, "nameSpace", "undeclared reference to 'nameSpace'"},
	}
	for _, tc := range tests {
		err := tc.kind.Check(tc.src)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %q: unexpected error %v", tc.kind.name, tc.src, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %q: error %v, want it to contain %q", tc.kind.name, tc.src, err, tc.want)
		}
	}
}

func TestEval(t *testing.T) {
	p, err := Identity.Compile("namespace + '.' + cluster")
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.EvalString(map[string]any{"namespace": "billing", "cluster": "eu", "policyName": "p", "labels": map[string]string{}, "annotations": map[string]string{}})
	if err != nil || got != "billing.eu" {
		t.Fatalf("EvalString = %q, %v", got, err)
	}
	b, err := Success.Compile("stats.errors == 0")
	if err != nil {
		t.Fatal(err)
	}
	ok, err := b.EvalBool(map[string]any{"stats": map[string]int64{"errors": 2}, "snapshot": map[string]any{}, "restored": map[string]any{}, "tier": "quick"})
	if err != nil || ok {
		t.Fatalf("EvalBool = %v, %v; want false", ok, err)
	}
}

func TestUnguarded(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want string
	}{
		{"repository.ready", ""},
		{"repository.indexBlobCount < 500", "repository.indexBlobCount"},
		{"!repository.indexBlobCountKnown || repository.indexBlobCount < 500", ""},
		{"maintenance.hasRun && maintenance.lastSuccessAgeSeconds < 86400", ""},
		{"maintenance.lastSuccessAgeSeconds < 86400 && repository.sizeBytes > 0", "maintenance.lastSuccessAgeSeconds,repository.sizeBytes"},
		{"repository.snapshotCountKnown", ""},
	} {
		if got := strings.Join(Unguarded(tc.src), ","); got != tc.want {
			t.Errorf("Unguarded(%q) = %q, want %q", tc.src, got, tc.want)
		}
	}
}
