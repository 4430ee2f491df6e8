package events

import (
	"errors"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func ev(t *testing.T, typ string, data string) event.Event {
	t.Helper()
	e := event.New()
	e.SetID("1")
	e.SetSource("test")
	e.SetType(typ)
	if data != "" {
		if err := e.SetData(event.ApplicationJSON, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func TestDecodeAPIServer(t *testing.T) {
	cases := []struct {
		name, typ, data string
		wantKey         string
		wantObj         bool
		wantErr         error
	}{
		{"resource mode", APIServerAdd, `{"apiVersion":"kopiur.home-operations.com/v1alpha1","kind":"Snapshot","metadata":{"name":"s","namespace":"ns","uid":"u"}}`, "ns/s", true, nil},
		{"reference mode", APIServerRefUpdate, `{"apiVersion":"batch/v1","kind":"Job","namespace":"ns","name":"j"}`, "ns/j", false, nil},
		{"cluster scoped", APIServerDelete, `{"apiVersion":"kopiur.home-operations.com/v1alpha1","kind":"ClusterRepository","metadata":{"name":"shared"}}`, "shared", true, nil},
		{"no data", APIServerAdd, ``, "", false, ErrMalformed},
		{"not json", APIServerAdd, `[1,2`, "", false, ErrMalformed},
		{"no name", APIServerUpdate, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}`, "", false, ErrMalformed},
		{"reference without kind", APIServerRefAdd, `{"name":"x"}`, "", false, ErrMalformed},
		{"other type", Ping, `{}`, "", false, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref, obj, err := DecodeAPIServer(ev(t, c.typ, c.data))
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) || !IsClientError(err) {
					t.Fatalf("err = %v, want %v (a client error)", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ref.Key() != c.wantKey || (obj != nil) != c.wantObj {
				t.Fatalf("ref %+v obj %v", ref, obj != nil)
			}
		})
	}
}

func TestNewAPIServerEventRoundTrips(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("kopiur.home-operations.com/v1alpha1")
	u.SetKind("Snapshot")
	u.SetNamespace("apps")
	u.SetName("nightly")
	u.SetUID("abc")
	u.SetResourceVersion("7")
	e, err := NewAPIServerEvent(APIServerUpdate, "https://10.0.0.1:443", u)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	if e.Subject() != "/apis/kopiur.home-operations.com/v1alpha1/namespaces/apps/snapshots/nightly" {
		t.Errorf("subject %q", e.Subject())
	}
	again, _ := NewAPIServerEvent(APIServerUpdate, "https://10.0.0.1:443", u)
	if again.ID() != e.ID() {
		t.Error("the same object version must give the same id")
	}
	ref, obj, err := DecodeAPIServer(e)
	if err != nil || ref.Key() != "apps/nightly" || obj.GetUID() != "abc" || ref.GroupKind().Group != "kopiur.home-operations.com" {
		t.Fatalf("decode: %+v %v", ref, err)
	}
	core := &unstructured.Unstructured{}
	core.SetAPIVersion("batch/v1")
	core.SetKind("Job")
	core.SetNamespace("apps")
	core.SetName("j")
	e, _ = NewAPIServerEvent(APIServerAdd, "s", core)
	if e.Subject() != "/apis/batch/v1/namespaces/apps/jobs/j" {
		t.Errorf("subject %q", e.Subject())
	}
}
