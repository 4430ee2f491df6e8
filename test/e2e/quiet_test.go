package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/test/harness"
)

// quieted holds the tests that already suspend failing repositories when
// they end.
var quieted sync.Map

// quietAfter suspends, when t ends, every repository left not Ready. A
// repository that cannot connect retries its connect Job for the rest of the
// suite (every 8 s with this suite's backoff ceiling), and a dozen of them
// left behind by tests that made them fail on purpose doubled the suite's
// wall time. Tests run one at a time, so nothing still running relies on a
// repository this suspends. A second run in one process (-count=2) would
// find its namespaces' repositories suspended; make flake-hunt runs a
// process per run.
func quietAfter(t *testing.T) {
	if strings.Contains(t.Name(), "/") {
		return // a subtest's parent may still need its failing repository
	}
	if _, done := quieted.LoadOrStore(t, true); done {
		return
	}
	t.Cleanup(func() {
		quieted.Delete(t)
		ctx, cancel := context.WithTimeout(context.Background(), harness.Timeout(time.Minute))
		defer cancel()
		suspend := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`))
		quiet := func(obj client.Object, st snapv1.RepositoryStatus, suspended bool) {
			if st.Phase == snapv1.RepositoryReady || suspended || obj.GetDeletionTimestamp() != nil {
				return
			}
			if err := env.Client.Patch(ctx, obj, suspend); client.IgnoreNotFound(err) != nil {
				t.Logf("quiet: suspend repository %s/%s: %v", obj.GetNamespace(), obj.GetName(), err)
			}
		}
		var repos snapv1.RepositoryList
		var cluster snapv1.ClusterRepositoryList
		if err := env.Client.List(ctx, &repos); err != nil {
			t.Logf("quiet: list repositories: %v", err)
		}
		if err := env.Client.List(ctx, &cluster); err != nil {
			t.Logf("quiet: list cluster repositories: %v", err)
		}
		for i := range repos.Items {
			quiet(&repos.Items[i], repos.Items[i].Status, repos.Items[i].Spec.Suspend)
		}
		for i := range cluster.Items {
			quiet(&cluster.Items[i], cluster.Items[i].Status, cluster.Items[i].Spec.Suspend)
		}
	})
}
