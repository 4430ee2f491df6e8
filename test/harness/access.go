package harness

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// Access is one kind of API request a component made: what RBAC checks.
type Access struct {
	Component   string
	Verb        string
	Group       string
	Resource    string
	Subresource string
	// Namespace is "" for a cluster-scoped resource or an all-namespaces
	// list; Name is "" for list, watch and create.
	Namespace string
	Name      string
	// Creates is the name in the body of a ConfigMap or Secret create. The
	// authorizer does not see it (RBAC cannot limit create by name), but a
	// check may tell one kind of object from another by it.
	Creates string
}

// AccessLog records the API requests each component's client makes, so a
// test can compare what the code calls with what its role grants. It sees
// the request as the API server's authorizer does (the same parser).
type AccessLog struct {
	mu   sync.Mutex
	seen map[Access]int
}

var requestInfo = &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}

// Wrap returns a rest.Config Wrap function recording component's requests.
func (l *AccessLog) Wrap(component string) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if info, err := requestInfo.NewRequestInfo(req); err == nil && info.IsResourceRequest {
				a := Access{Component: component, Verb: info.Verb, Group: info.APIGroup, Resource: info.Resource, Subresource: info.Subresource,
					Namespace: info.Namespace, Name: info.Name}
				// Only where a check needs it: each created Event would be a record of its own.
				if info.Verb == "create" && info.APIGroup == "" && (info.Resource == "configmaps" || info.Resource == "secrets") && info.Subresource == "" && req.Body != nil {
					a.Creates = createdName(req)
				}
				l.add(a)
			}
			return rt.RoundTrip(req)
		})
	}
}

func (l *AccessLog) add(a Access) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[Access]int{}
	}
	l.seen[a]++
}

// Seen returns every access recorded so far, sorted.
func (l *AccessLog) Seen() []Access {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Access, 0, len(l.seen))
	for a := range l.seen {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return strings.Join([]string{a.Component, a.Group, a.Resource, a.Subresource, a.Verb, a.Namespace, a.Name, a.Creates}, "\x00") <
			strings.Join([]string{b.Component, b.Group, b.Resource, b.Subresource, b.Verb, b.Namespace, b.Name, b.Creates}, "\x00")
	})
	return out
}

// createdName reads metadata.name from a JSON create body and puts the body
// back for the transport.
func createdName(req *http.Request) string {
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	req.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return ""
	}
	var obj struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	if json.Unmarshal(body, &obj) != nil {
		return "" // protobuf, or not an object
	}
	return obj.Metadata.Name
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
