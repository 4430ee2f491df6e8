package snapshot

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/moverjob"
)

// A runJob hook's Job never takes the mover Job's name, however long the
// Snapshot's name (a schedule's firings get long ones), nor another
// hook's.
func TestHookJobNamesNeverTakeTheMovers(t *testing.T) {
	for _, name := range []string{"db", strings.Repeat("a", 54), strings.Repeat("nightly-", 8) + "x", strings.Repeat("b", 253)} {
		s := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "s-uid"}}
		seen := map[string]string{moverjob.Name(s.Name, string(s.UID)): "the mover"}
		for _, short := range []string{"pre", "post"} {
			for i := range 3 {
				n := hookJobName(s, short, i)
				if len(n) > 63 {
					t.Fatalf("%s: hook name %q is longer than a label value", name, n)
				}
				if other, ok := seen[n]; ok {
					t.Fatalf("%s: hook %s-%d takes the name %q of %s", name, short, i, n, other)
				}
				seen[n] = short
			}
		}
	}
}
