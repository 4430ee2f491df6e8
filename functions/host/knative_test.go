package host

import (
	"strings"
	"testing"
)

func TestKnativeTriggerSender(t *testing.T) {
	long := "a-release-name-that-is-long-enough-snapflow-retention-succeeded"
	for _, tc := range []struct {
		trigger, want string
	}{
		{"snapflow-snapshot-add", "system:serviceaccount:snapflow-system:snapflow-snapshot-add-oidc-eventing.knative.dev-trigger"},
		{"Mixed-Case", "system:serviceaccount:snapflow-system:mixed-case-oidc-eventing.knative.dev-trigger"},
	} {
		if got := KnativeTriggerSender("snapflow-system", tc.trigger); got != tc.want {
			t.Errorf("KnativeTriggerSender(%q) = %q, want %q", tc.trigger, got, tc.want)
		}
	}
	// Past 63 characters the name is the head of the Trigger's name and a
	// hash: still a valid ServiceAccount name, and distinct per Trigger.
	a := strings.TrimPrefix(KnativeTriggerSender("ns", long), "system:serviceaccount:ns:")
	b := strings.TrimPrefix(KnativeTriggerSender("ns", long+"x"), "system:serviceaccount:ns:")
	if len(a) != 63 || !strings.HasPrefix(a, long[:31]) || a == b {
		t.Errorf("long names: %q (%d) and %q", a, len(a), b)
	}
}

func TestKnativeServiceAudience(t *testing.T) {
	if got := KnativeServiceAudience("snapflow-system", "snapflow-cleanup"); got != "serving.knative.dev/service/snapflow-system/snapflow-cleanup" {
		t.Errorf("got %q", got)
	}
}
