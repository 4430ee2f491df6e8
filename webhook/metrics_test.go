package webhook

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Made-up operations in an AdmissionReview all count as "other", so a
// caller cannot grow the metric without bound.
func TestOperationLabelIsBounded(t *testing.T) {
	for op, want := range map[string]string{"CREATE": "CREATE", "UPDATE": "UPDATE", "DELETE": "DELETE", "CONNECT": "CONNECT", "": "other", "create": "other", "X-1": "other"} {
		if got := operationLabel(op); got != want {
			t.Errorf("%q: %q, want %q", op, got, want)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(admissionTotal)
	series := func() int {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, mf := range mfs {
			n += len(mf.GetMetric())
		}
		return n
	}
	before := series()
	for _, op := range []string{"A1", "A2", "A3", "A4"} {
		observe("snapshots", op, "validate", "denied", time.Millisecond)
	}
	if n := series() - before; n > 1 {
		t.Fatalf("four made-up operations added %d series, want at most one", n)
	}
}
