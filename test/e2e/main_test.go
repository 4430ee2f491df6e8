// Package e2e drives snapflow the way users do, against a real
// kube-apiserver with the real kubectl.
package e2e

import (
	"testing"
	"time"

	prunefn "github.com/snapflow/snapflow/functions/prune"
	"github.com/snapflow/snapflow/functions/runtime"
	"github.com/snapflow/snapflow/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) {
	harness.Main(m, harness.MainOptions{
		Options: harness.Options{ExternalCRDs: harness.AllExternalCRDs},
		S3:      &harness.S3Options{Versioning: true},
		// The suite's cluster has a global volume policy baseline, as a
		// platform team would configure it.
		Webhook: &harness.WebhookOptions{GlobalVolumePolicies: globalPolicies, Velero: true},
		// Backups run for real: local node, functions and the kube source.
		Functions: &harness.FunctionsOptions{RepositoryRetry: 2 * time.Second, GlobalVolumePoliciesConfigMap: harness.GlobalVolumePoliciesConfigMap,
			Clock: clock.Now, Extra: pruneFunction},
	}, func(e *harness.Env) { env = e })
}

const globalPolicies = `version: v1
volumePolicies:
  - conditions: {storageClass: [scratch]}
    action: {type: skip}
  - conditions: {}
    action: {type: fs-backup}
`

// clock is the functions' clock: real time until a test sets it.
var clock = &harness.Clock{}

// pruneFunction serves the prune function with no default BackupRepo (each
// test's prune requested event names its own); versitygw needs path-style.
func pruneFunction(d harness.Deps) []runtime.Function {
	fn := &prunefn.Function{Client: d.Client, Settings: prunefn.Settings{PathStyle: true}, Emitter: d.Emitter, Recorder: d.Recorder("snapflow-prune")}
	return []runtime.Function{{Name: "prune", Handle: fn.Handle}}
}
