package validate

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapflow/snapflow/api/wellknown"
)

// ControllerMetadata refuses a change, by a requester that is not one of
// snapflow's functions, to a label or annotation only they may write
// (wellknown.ControllerMetadata). old is nil on CREATE. Whether the
// requester is trusted is the caller's decision: only the webhook knows it.
func ControllerMetadata(old, obj metav1.Object) Result {
	var r Result
	for _, k := range wellknown.ControllerMetadata {
		if old == nil && k.UpdateOnly {
			continue
		}
		field, now, before := "metadata.labels", obj.GetLabels(), map[string]string(nil)
		if k.Annotation {
			field, now = "metadata.annotations", obj.GetAnnotations()
		}
		if old != nil {
			before = old.GetLabels()
			if k.Annotation {
				before = old.GetAnnotations()
			}
		}
		v, has := now[k.Key]
		w, had := before[k.Key]
		if has == had && v == w {
			continue
		}
		verb := "set"
		if !has {
			verb = "removed"
		} else if had {
			verb = "changed"
		}
		r.Also(fieldErr(field+"["+k.Key+"]", "may be %s only by snapflow's functions: %s; leave it as it is (remove it from your manifest)", verb, k.Why))
	}
	return r
}
