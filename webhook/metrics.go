package webhook

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	admissionTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "snapflow_webhook_admission_total",
		Help: "Admission requests answered, by kind, operation, mode (mutate or validate) and decision (allowed, mutated, denied).",
	}, []string{"kind", "operation", "mode", "decision"})
	admissionSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "snapflow_webhook_admission_duration_seconds",
		Help:    "Time to answer one admission request, by kind, operation and mode.",
		Buckets: []float64{0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1},
	}, []string{"kind", "operation", "mode"})
	// Kopiur's series, so its dashboards and alerts work unchanged.
	kopiurAdmissionTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kopiur_webhook_admission_total",
		Help: "Admission requests answered, by kind and decision (allowed or denied), as Kopiur counts them.",
	}, []string{"kind", "decision"})
	certRotations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "snapflow_webhook_certificate_rotations_total",
		Help: "Serving certificate renewals, by what was renewed (leaf or ca).",
	}, []string{"what"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(admissionTotal, kopiurAdmissionTotal, admissionSeconds, certRotations)
}

func observe(kind, op, mode, decision string, d time.Duration) {
	op = operationLabel(op)
	admissionTotal.WithLabelValues(kind, op, mode, decision).Inc()
	// One verdict per request: the validating answer, or a denial by the
	// mutating entry (which the API server's validation never sees).
	switch {
	case decision == "denied":
		kopiurAdmissionTotal.WithLabelValues(kind, "denied").Inc()
	case mode == "validate":
		kopiurAdmissionTotal.WithLabelValues(kind, "allowed").Inc()
	}
	admissionSeconds.WithLabelValues(kind, op, mode).Observe(d.Seconds())
}

// operationLabel keeps the operation label to the four the API server
// sends: anyone who reaches the webhook could otherwise mint a series per
// made-up operation.
func operationLabel(op string) string {
	switch op {
	case "CREATE", "UPDATE", "DELETE", "CONNECT":
		return op
	}
	return "other"
}
