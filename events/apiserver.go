package events

import (
	"encoding/json"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ObjectRef names the Kubernetes object an ApiServerSource event is about.
type ObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
}

// GroupKind is the ref's group and kind.
func (r ObjectRef) GroupKind() schema.GroupKind {
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	return schema.GroupKind{Group: gv.Group, Kind: r.Kind}
}

// Key is namespace/name (name alone for cluster-scoped objects).
func (r ObjectRef) Key() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// IsAPIServer says whether t is an ApiServerSource type (either mode).
func IsAPIServer(t string) bool {
	return strings.HasPrefix(t, "dev.knative.apiserver.resource.") || strings.HasPrefix(t, "dev.knative.apiserver.ref.")
}

// IsDelete says whether t reports a deletion.
func IsDelete(t string) bool { return t == APIServerDelete || t == APIServerRefDelete }

// DecodeAPIServer reads an ApiServerSource event in Resource mode (data is
// the object) or Reference mode (data is a reference). The object is nil in
// Reference mode. Handlers treat the object as a hint and read the live one:
// events can arrive late, twice or out of order.
func DecodeAPIServer(e event.Event) (ObjectRef, *unstructured.Unstructured, error) {
	if !IsAPIServer(e.Type()) {
		return ObjectRef{}, nil, Malformed("type %q is not an ApiServerSource type", e.Type())
	}
	if len(e.Data()) == 0 {
		return ObjectRef{}, nil, Malformed("%s event %s has no data", e.Type(), e.ID())
	}
	if strings.HasPrefix(e.Type(), "dev.knative.apiserver.ref.") {
		var ref ObjectRef
		if err := json.Unmarshal(e.Data(), &ref); err != nil {
			return ObjectRef{}, nil, Malformed("reference data of event %s: %v", e.ID(), err)
		}
		if ref.Kind == "" || ref.Name == "" {
			return ObjectRef{}, nil, Malformed("reference data of event %s lacks kind or name", e.ID())
		}
		return ref, nil, nil
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(e.Data()); err != nil {
		return ObjectRef{}, nil, Malformed("object data of event %s: %v", e.ID(), err)
	}
	ref := ObjectRef{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID())}
	if ref.Kind == "" || ref.Name == "" {
		return ObjectRef{}, nil, Malformed("object data of event %s lacks kind or metadata.name", e.ID())
	}
	return ref, obj, nil
}

// NewAPIServerEvent builds the Resource-mode event ApiServerSource would send
// for obj; snapflow's own kube source uses it. The id is unique per object
// version, so a redelivered event keeps its id.
func NewAPIServerEvent(typ, source string, obj *unstructured.Unstructured) (event.Event, error) {
	e := event.New()
	e.SetType(typ)
	e.SetSource(source)
	e.SetID(string(obj.GetUID()) + "/" + obj.GetResourceVersion() + "/" + typ[strings.LastIndex(typ, ".")+1:])
	e.SetSubject(subjectOf(obj))
	e.SetExtension("kind", obj.GetKind())
	if obj.GetNamespace() != "" {
		e.SetExtension("namespace", obj.GetNamespace())
	}
	e.SetExtension("name", obj.GetName())
	b, err := obj.MarshalJSON()
	if err != nil {
		return e, err
	}
	return e, e.SetData(event.ApplicationJSON, json.RawMessage(b))
}

// subjectOf is ApiServerSource's selfLink-like subject (it writes /apis/v1
// for the core group too, and guesses the plural the same way).
func subjectOf(obj *unstructured.Unstructured) string {
	gvk := obj.GroupVersionKind()
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	p := "/apis/" + gvk.GroupVersion().String()
	if ns := obj.GetNamespace(); ns != "" {
		p += "/namespaces/" + ns
	}
	return p + "/" + plural.Resource + "/" + obj.GetName()
}
