package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapflow/snapflow/internal/coverage"
)

func TestPrintCoverage(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	last, next := metav1.NewTime(now.Add(-3*time.Hour)), metav1.NewTime(now.Add(15*time.Hour))
	var b bytes.Buffer
	printCoverage(&b, []coverage.Verdict{
		{Namespace: "apps", PVC: "db", State: coverage.Protected, Policies: []string{"db"}, LastSuccess: &last, NextFiring: &next, Reason: "backed up by db"},
		{Namespace: "apps", PVC: "forgotten", State: coverage.Unprotected, Reason: "no SnapshotPolicy covers it"},
	}, true, now)
	got := b.String()
	for _, want := range []string{
		"NAMESPACE  PVC        STATE        POLICIES  LAST SUCCESS  NEXT    REASON",
		"apps       db         Protected    db        3h ago        in 15h  backed up by db",
		"apps       forgotten  UNPROTECTED  -         -             -       no SnapshotPolicy covers it",
		"2 PVC(s): 1 protected, 0 excluded, 0 failing, 0 unscheduled, 0 suspended, 1 unprotected",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}
