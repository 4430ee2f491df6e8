package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/snapflow/snapflow/test/harness"
)

// The RBAC drift check: after a whole-package run, every API request each
// component made (recorded on its impersonated client) must be granted by
// the chart's roles for its ServiceAccount, and every verb the chart grants
// it must have been used by some test, or be listed in unexercised with
// the reason. A grant nobody calls is a privilege to remove; a call the
// chart does not grant is a feature that fails in a real cluster.

// driftComponents are the components that act as their chart identity in
// the suite, the webhook among them (the mover's pods get no credentials at
// all).
var driftComponents = []string{"snapshot", "cleanup", "retention", "schedule", "restore", "verify", "maintenance", "prune", "kube-source", "exporter", "webhook"}

// unexercised are grants the suite does not drive, each with the reason it
// stays. Keys are "component verb group/resource".
var unexercised = func() map[string]string {
	m := map[string]string{}
	add := func(reason string, keys ...string) {
		for _, k := range keys {
			m[k] = reason
		}
	}
	add("one server holds every function in the suite, and it reviews senders' tokens as the snapshot function; in a cluster each function reviews its own",
		"cleanup create authentication.k8s.io/tokenreviews", "restore create authentication.k8s.io/tokenreviews",
		"retention create authentication.k8s.io/tokenreviews", "schedule create authentication.k8s.io/tokenreviews",
		"verify create authentication.k8s.io/tokenreviews", "prune create authentication.k8s.io/tokenreviews",
		"maintenance create authentication.k8s.io/tokenreviews")
	add("credential projection copies ConfigMaps only for a CA bundle, which the suite's ClusterRepositories do not have, and rewrites a copy only when a redelivered event finds it made already, which the suite does not arrange",
		"snapshot create /configmaps (projection)", "snapshot update /configmaps (projection)", "snapshot delete /configmaps (projection)", "snapshot update /secrets (projection)",
		"restore create /configmaps (projection)", "restore update /configmaps (projection)", "restore delete /configmaps (projection)", "restore update /secrets (projection)",
		"cleanup create /configmaps (projection)", "cleanup update /configmaps (projection)", "cleanup delete /configmaps (projection)", "cleanup update /secrets (projection)")
	add("verification on a ClusterRepository, which projects, is not driven",
		"verify get /configmaps (projection)", "verify list /configmaps (projection)", "verify create /configmaps (projection)", "verify update /configmaps (projection)", "verify delete /configmaps (projection)",
		"verify get /secrets (projection)", "verify list /secrets (projection)", "verify create /secrets (projection)", "verify update /secrets (projection)", "verify delete /secrets (projection)")
	add("maintenance of a ClusterRepository from a namespace other than snapflow's, which projects, is not driven",
		"maintenance get /configmaps (projection)", "maintenance list /configmaps (projection)", "maintenance create /configmaps (projection)", "maintenance update /configmaps (projection)", "maintenance delete /configmaps (projection)",
		"maintenance get /secrets (projection)", "maintenance list /secrets (projection)", "maintenance create /secrets (projection)", "maintenance update /secrets (projection)", "maintenance delete /secrets (projection)")
	add("a work spec an earlier attempt left with other content is replaced (host.CreateWorkSpec); the suite does not change a run's spec between attempts",
		"verify delete /configmaps", "maintenance delete /configmaps")
	add("the restore function never execs itself: it holds pods/exec because RBAC lets it put into a run's Role only what it holds",
		"restore create /pods/exec", "restore get /pods/exec")
	add("a stream run whose exec grant already exists (a redelivery between grant and Job) reconciles its Role; the suite does not interrupt a run there",
		"snapshot update rbac.authorization.k8s.io/roles", "restore update rbac.authorization.k8s.io/roles")
	add("a wedged maintenance mover's Job is deleted (internal/jobwatch); the suite wedges backup movers only",
		"maintenance delete batch/jobs")
	add("a full maintenance run's storage count lands on its repository's status; the suite runs full maintenance on a namespaced Repository only",
		"maintenance patch kopiur.home-operations.com/clusterrepositories/status")
	add("the Event recorder patches an Event it already wrote when the same one repeats; no test makes this function repeat one",
		"cleanup patch /events", "restore patch /events", "retention patch /events", "verify patch /events", "prune patch /events", "maintenance patch /events")
	add("the prune ServiceAccount also runs the `snapflow prune` Job and CronJob, whose inventory (internal/prune/kubeinv) reads these; the suite runs that command as its admin",
		"prune get /persistentvolumeclaims", "prune get /persistentvolumes", "prune get dataprotection.kubeblocks.io/backups",
		"prune get dataprotection.kubeblocks.io/restores", "prune list dataprotection.kubeblocks.io/backuprepos", "prune list storage.k8s.io/storageclasses")
	add("workloadExec hooks exec over WebSocket first (get); create is SPDY's, taken where an API server or a proxy refuses the WebSocket upgrade",
		"snapshot create /pods/exec")
	add("the verify function records Events only for a refused request, a failed verification and an ignored scratch StorageClass, which the suite does not drive",
		"verify create /events")
	add("setting blockOwnerDeletion on an ownerReference needs update on the owner's finalizers where the OwnerReferencesPermissionEnforcement admission plugin runs; the suite's API server does not enable it",
		"snapshot update kopiur.home-operations.com/snapshots/finalizers", "restore update kopiur.home-operations.com/restores/finalizers",
		"verify update kopiur.home-operations.com/snapshotpolicies/finalizers", "maintenance update kopiur.home-operations.com/maintenances/finalizers")
	add("client-go streams an informer's initial list through a watch (WatchList) where the API server supports it, as the suite's does; API servers without it need list",
		"kube-source list /persistentvolumeclaims", "kube-source list batch/jobs",
		"kube-source list kopiur.home-operations.com/snapshots", "kube-source list kopiur.home-operations.com/repositories",
		"kube-source list kopiur.home-operations.com/clusterrepositories", "kube-source list kopiur.home-operations.com/snapshotpolicies",
		"kube-source list kopiur.home-operations.com/snapshotschedules", "kube-source list kopiur.home-operations.com/restores",
		"kube-source list kopiur.home-operations.com/maintenances",
		"exporter list kopiur.home-operations.com/snapshots", "exporter list kopiur.home-operations.com/snapshotpolicies",
		"exporter list kopiur.home-operations.com/snapshotschedules",
		"exporter list kopiur.home-operations.com/repositories", "exporter list kopiur.home-operations.com/clusterrepositories",
		"exporter list kopiur.home-operations.com/restores", "exporter list kopiur.home-operations.com/maintenances",
		"exporter list /persistentvolumeclaims", "exporter list /persistentvolumes", "exporter list /namespaces")
	add("a restore from a ClusterRepository reads the namespace for allowedNamespaces.selector; the suite restores from namespaced repositories and by identity",
		"restore get /namespaces")
	add("policies, schedules and verification on a ClusterRepository read it; the suite's ClusterRepository tests take snapshots and delete them",
		"retention get kopiur.home-operations.com/clusterrepositories", "schedule get kopiur.home-operations.com/clusterrepositories",
		"verify get kopiur.home-operations.com/clusterrepositories")
	add("the webhook reads a namespace or ClusterRepository live only when its cache has not seen it yet; the suite's exist well before they are named",
		"webhook get /namespaces", "webhook get kopiur.home-operations.com/clusterrepositories")
	add("the webhook's cache streams its initial list through a watch (WatchList) where the API server supports it, as the suite's does; API servers without it need list",
		"webhook list /namespaces", "webhook list kopiur.home-operations.com/clusterrepositories",
		"webhook list kopiur.home-operations.com/repositories", "webhook list kopiur.home-operations.com/snapshotpolicies")
	add("the webhook writes its certificate Secret again when it renews; the suite's webhook does not live long enough, and TestSelfManagedTLS renews through its own instance",
		"webhook update /secrets")
	add("a snapshot.requested event for a policy with a pvcSelector lists the PVCs to expand it (functions/snapshot/request.go); the suite's requests name a PVC",
		"snapshot list /persistentvolumeclaims")
	return m
}()

// intermittent are grants some runs of the suite use and others do not,
// because whether the path is taken depends on timing; neither direction
// is reported for them.
var intermittent = map[string]string{
	"cleanup patch kopiur.home-operations.com/clusterrepositories/status": "a ClusterRepository's deletion status is written only when a resync finds a batch of its Snapshots pending",
	// A wedged mover's Job is deleted (internal/jobwatch). The suite drives
	// it for backups; for restores and verification only when load makes a
	// mover look wedged.
	"restore delete batch/jobs": "jobwatch", "verify delete batch/jobs": "jobwatch",
	"snapshot patch /events": "the Event recorder patches an Event when the same one repeats, as a run refused again before its repository is ready does in some runs",
	// Replace reads a run's mover Job only when it sees the run between
	// its slot claim and its Job recorded, which depends on timing.
	"schedule get batch/jobs": "a run caught starting",
}

// oneNamespace are cluster-wide grants the suite uses only in the release
// namespace, each with the reason a cluster needs them everywhere.
var oneNamespace = map[string]string{}

// grant is one verb on one resource ("pods/exec") of one group; "*"
// matches all. ns is where it holds: "" cluster-wide (a
// ClusterRoleBinding), "*" in any namespace but not cluster-wide (a tenant
// namespace's RoleBinding, as each test namespace gets), else that
// namespace. names are its resourceNames; none means any name.
// projection marks a grant of the opt-in credential projection roles.
type grant struct {
	group, resource, verb, ns string
	names                     []string
	projection                bool
}

// String names the grant in reports and exception keys; a projection
// grant is named apart, so the function's own grant of the same verb
// cannot make it look used.
func (g grant) String() string {
	if g.projection {
		return g.verb + " " + g.group + "/" + g.resource + " (projection)"
	}
	return g.verb + " " + g.group + "/" + g.resource
}

func (g grant) covers(a harness.Access) bool {
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	where := g.ns == "" || g.ns == a.Namespace || (g.ns == "*" && a.Namespace != "")
	if g.projection && !projectionCall(a) {
		return false
	}
	return (g.group == "*" || g.group == a.Group) && (g.resource == "*" || g.resource == res) && (g.verb == "*" || g.verb == a.Verb) &&
		where && (len(g.names) == 0 || slices.Contains(g.names, a.Name))
}

// everyone are the grants the API server's default roles give every
// authenticated user (system:basic-user), which no chart needs to repeat.
var everyone = []grant{
	{group: "authentication.k8s.io", resource: "selfsubjectreviews", verb: "create"},
	{group: "authorization.k8s.io", resource: "selfsubjectaccessreviews", verb: "create"},
	{group: "authorization.k8s.io", resource: "selfsubjectrulesreviews", verb: "create"},
}

// projectionRole names the chart's credential projection roles.
const projectionRole = "credential-projection"

// projectionCall says whether a could be credential projection's own work.
// The chart grants projection only when asked, and the suite asks, so a
// function's own need of ConfigMaps must not pass through it: projection
// touches ConfigMaps only as copies (named for their Job, "-ca"), CA bundle
// sources (the suite names none) and the sweep's list. The functions touch
// Secrets only through projection.
func projectionCall(a harness.Access) bool {
	if a.Group != "" || a.Resource != "configmaps" {
		return true
	}
	name := a.Name
	if a.Verb == "create" {
		name = a.Creates
	}
	return a.Verb == "list" || strings.HasSuffix(name, "-ca")
}

// chartGrants reads the roles and bindings in docs and returns what each
// ServiceAccount user is granted.
func chartGrants(docs ...[]byte) (map[string][]grant, error) {
	type roleKey struct{ kind, ns, name string }
	roles := map[roleKey][]rbacv1.PolicyRule{}
	var bindings []rbacv1.RoleBinding // ClusterRoleBindings too, with no namespace
	for _, d := range docs {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(d), 4096)
		for {
			var o struct {
				Kind     string                           `json:"kind"`
				Metadata struct{ Name, Namespace string } `json:"metadata"`
				Rules    []rbacv1.PolicyRule              `json:"rules"`
				RoleRef  rbacv1.RoleRef                   `json:"roleRef"`
				Subjects []rbacv1.Subject                 `json:"subjects"`
			}
			if err := dec.Decode(&o); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, err
			}
			switch o.Kind {
			case "ClusterRole":
				roles[roleKey{"ClusterRole", "", o.Metadata.Name}] = o.Rules
			case "Role":
				roles[roleKey{"Role", o.Metadata.Namespace, o.Metadata.Name}] = o.Rules
			case "RoleBinding", "ClusterRoleBinding":
				b := rbacv1.RoleBinding{RoleRef: o.RoleRef, Subjects: o.Subjects}
				if o.Kind == "RoleBinding" {
					b.Namespace = o.Metadata.Namespace
				}
				bindings = append(bindings, b)
			}
		}
	}
	out := map[string][]grant{}
	for _, b := range bindings {
		k := roleKey{b.RoleRef.Kind, "", b.RoleRef.Name}
		if k.kind == "Role" {
			k.ns = b.Namespace
		}
		rules, ok := roles[k]
		if !ok {
			return nil, fmt.Errorf("binding to %s %s/%s, which the chart does not render", k.kind, k.ns, k.name)
		}
		for _, s := range b.Subjects {
			if s.Kind != "ServiceAccount" {
				continue
			}
			user := "system:serviceaccount:" + s.Namespace + ":" + s.Name
			for _, r := range rules {
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							out[user] = append(out[user], grant{group: g, resource: res, verb: v, ns: b.Namespace, names: r.ResourceNames,
								projection: strings.Contains(b.RoleRef.Name, projectionRole)})
						}
					}
				}
			}
		}
	}
	return out, nil
}

// rbacDrift compares what components did with what they are granted.
// exceptions excuse grants no test used (unexercised); oneNamespace excuses
// cluster-wide grants that every test used only in the release namespace.
func rbacDrift(grants map[string][]grant, seen []harness.Access, components []string, identity func(string) string, release string, exceptions, oneNamespace map[string]string) (problems, notes []string) {
	byComponent := map[string][]harness.Access{}
	for _, a := range seen {
		byComponent[a.Component] = append(byComponent[a.Component], a)
	}
	for _, a := range seen {
		covered := false
		for _, g := range slices.Concat(grants[identity(a.Component)], everyone) {
			if g.covers(a) {
				covered = true
				break
			}
		}
		if !covered {
			res := a.Resource
			if a.Subresource != "" {
				res += "/" + a.Subresource
			}
			problems = append(problems, fmt.Sprintf("%s calls %s %s/%s, which the chart does not grant it", a.Component, a.Verb, a.Group, res))
		}
	}
	// A verb on a resource is used when any of the grants giving it covered
	// a call: two roles may grant one verb (a function's own and
	// projection's), each for some calls.
	used := map[string]bool{}
	for _, c := range components {
		for _, g := range grants[identity(c)] {
			for _, a := range byComponent[c] {
				if !used[c+" "+g.String()] && g.covers(a) {
					used[c+" "+g.String()] = true
				}
			}
		}
	}
	judged := map[string]bool{}
	for _, c := range components {
		for _, g := range grants[identity(c)] {
			key := c + " " + g.String()
			if judged[key] {
				continue
			}
			judged[key] = true
			if _, ok := intermittent[key]; ok {
				used[key] = true
				continue
			}
			_, excused := exceptions[key]
			switch {
			case !used[key] && !excused:
				problems = append(problems, fmt.Sprintf("the chart grants %s %s, which no test saw it use: drop it, or test the path and list it in unexercised with the reason", c, g))
			case used[key] && excused:
				// Not a failure: whether a path runs can depend on load.
				notes = append(notes, fmt.Sprintf("unexercised lists %q, which this run used: if every run does, remove the entry", key))
			}
			used[key] = used[key] || excused
		}
	}
	// A cluster-wide grant every call of which was in the release namespace
	// is a Role's worth of need given the whole cluster. (One used only in
	// some tenant's namespace is needed in every tenant's.)
	narrow := map[string]bool{}
	for _, c := range components {
		for _, g := range grants[identity(c)] {
			if g.ns != "" {
				continue
			}
			nss := map[string]bool{}
			for _, a := range byComponent[c] {
				if g.covers(a) {
					nss[a.Namespace] = true
				}
			}
			key := c + " " + g.String()
			if len(nss) != 1 || !nss[release] || narrow[key] {
				continue
			}
			narrow[key] = true
			if _, ok := oneNamespace[key]; !ok {
				problems = append(problems, fmt.Sprintf("the chart grants %s %s cluster-wide, but every call was in the release namespace %s: grant it there with a Role, or list it in oneNamespace with the reason it needs every namespace", c, g, release))
			}
		}
	}
	for key := range oneNamespace {
		if !narrow[key] {
			notes = append(notes, fmt.Sprintf("oneNamespace lists %q, which this run did not use in the release namespace alone: if no run does, remove the entry", key))
		}
	}
	for key := range exceptions {
		if !used[key] {
			problems = append(problems, fmt.Sprintf("unexercised lists %q, which the chart no longer grants: remove the entry", key))
		}
	}
	for key := range intermittent {
		if c, _, _ := strings.Cut(key, " "); slices.Contains(components, c) && !used[key] {
			problems = append(problems, fmt.Sprintf("intermittent lists %q, which the chart no longer grants: remove the entry", key))
		}
	}
	sort.Strings(problems)
	sort.Strings(notes)
	return problems, notes
}

// checkRBACDrift is the suite's AfterAll: it writes what each component
// used next to the control plane's work directory and fails on drift.
func checkRBACDrift(e *harness.Env) error {
	if e.Functions == nil {
		return nil
	}
	grants, err := chartGrants(releaseDocs, tenantRBAC(tenantPlaceholder))
	if err != nil {
		return fmt.Errorf("read the chart's RBAC: %w", err)
	}
	// The prune tests grant their credential Secret by name, as the chart's
	// prune.secretReader Role does for each Secret listed there.
	for user, gs := range grants {
		for i := range gs {
			if gs[i].ns == tenantPlaceholder {
				grants[user][i].ns = "*"
			}
		}
	}
	prune := chartIdentity("prune")
	grants[prune] = append(grants[prune], grant{resource: "secrets", verb: "get", ns: "*", names: []string{pruneSecret}})
	seen := e.Functions.Access.Seen()
	if e.Webhook != nil {
		seen = append(seen, e.Webhook.Access.Seen()...)
	}
	var report strings.Builder
	for _, a := range seen {
		fmt.Fprintf(&report, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Component, a.Verb, a.Group, a.Resource, a.Subresource, a.Namespace, a.Name, a.Creates)
	}
	path := filepath.Join(e.WorkDir, "rbac-access.tsv")
	if err := os.WriteFile(path, []byte(report.String()), 0o600); err != nil {
		return err
	}
	problems, notes := rbacDrift(grants, seen, driftComponents, chartIdentity, harness.WebhookNamespace, unexercised, oneNamespace)
	for _, n := range notes {
		fmt.Fprintln(os.Stderr, "rbac drift note:", n)
	}
	if len(problems) > 0 {
		return fmt.Errorf("RBAC drift between the code and the chart (the calls made are in %s):\n- %s", path, strings.Join(problems, "\n- "))
	}
	return nil
}

// The drift kernel finds both directions, honours where and by which name
// a grant holds, and keeps its exception lists honest.
func TestRBACDriftKernel(t *testing.T) {
	id := func(c string) string { return "u:" + c }
	const release = "sys"
	grants := map[string][]grant{"u:a": {
		{resource: "pods", verb: "get"}, {group: "batch", resource: "jobs", verb: "create"}, {resource: "pods/exec", verb: "create"},
		{resource: "secrets", verb: "get"},
		// Two grants of one verb, the first covering no call: the verb is used.
		{resource: "configmaps", verb: "get", ns: "elsewhere"},
		{resource: "configmaps", verb: "get", ns: release}, {resource: "leases", verb: "update", ns: "*", names: []string{"mine"}},
		{resource: "events", verb: "create"},
	}}
	seen := []harness.Access{
		{Component: "a", Verb: "get", Resource: "pods", Namespace: "t1"},
		{Component: "a", Verb: "create", Group: "batch", Resource: "jobs", Namespace: "t2"},
		{Component: "a", Verb: "delete", Resource: "pods", Namespace: "t1"},
		{Component: "a", Verb: "create", Resource: "pods", Subresource: "exec", Namespace: "t1"},
		{Component: "a", Verb: "get", Resource: "configmaps", Namespace: release},
		{Component: "a", Verb: "update", Resource: "leases", Namespace: "t1", Name: "mine"},
		{Component: "a", Verb: "create", Resource: "events", Namespace: "t1"},
		{Component: "a", Verb: "create", Resource: "events", Namespace: release},
	}
	outside := []harness.Access{
		{Component: "a", Verb: "get", Resource: "configmaps", Namespace: "t1"},
		{Component: "a", Verb: "update", Resource: "leases", Namespace: "t1", Name: "theirs"},
		{Component: "a", Verb: "update", Resource: "leases", Name: "mine"},
	}
	inRelease := []harness.Access{{Component: "a", Verb: "get", Resource: "secrets", Namespace: release}}
	tests := []struct {
		name       string
		seen       []harness.Access
		exceptions map[string]string
		oneNS      map[string]string
		want       []string
	}{
		{"an ungranted call and an unused grant", seen, nil, nil, []string{
			"a calls delete /pods, which the chart does not grant it",
			"the chart grants a get /secrets, which no test saw it use",
		}},
		{"an unused grant excused", seen, map[string]string{"a get /secrets": "reason"}, nil, []string{
			"a calls delete /pods",
		}},
		{"an exception for a used grant is only a note", seen, map[string]string{"a get /secrets": "r", "a get /pods": "r"}, nil, []string{
			"a calls delete /pods",
		}},
		{"an exception for a grant that is gone", seen[:2], map[string]string{"a get /secrets": "r", "a create /pods/exec": "r", "a list /nodes": "r",
			"a get /configmaps": "r", "a update /leases": "r", "a create /events": "r"}, nil, []string{
			`unexercised lists "a list /nodes", which the chart no longer grants`,
		}},
		{"a namespaced grant does not cover another namespace, nor a name grant another name or the cluster", slices.Concat(seen, outside),
			map[string]string{"a get /secrets": "r"}, nil, []string{
				"a calls delete /pods",
				"a calls get /configmaps",
				"a calls update /leases",
				"a calls update /leases",
			}},
		{"a cluster-wide grant used only in the release namespace", slices.Concat(seen, inRelease), nil, nil, []string{
			"a calls delete /pods",
			"the chart grants a get /secrets cluster-wide, but every call was in the release namespace sys",
		}},
		{"one excused with its reason", slices.Concat(seen, inRelease), nil, map[string]string{"a get /secrets": "r"}, []string{
			"a calls delete /pods",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, notes := rbacDrift(grants, tt.seen, []string{"a"}, id, release, tt.exceptions, tt.oneNS)
			if _, ok := tt.exceptions["a get /pods"]; ok && (len(notes) != 1 || !strings.Contains(notes[0], `"a get /pods"`)) {
				t.Errorf("notes %v, want one on the used exception", notes)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(got), len(tt.want), strings.Join(got, "\n"))
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("problem %d: %q, want it to start with %q", i, got[i], w)
				}
			}
		})
	}
}

// A projection grant covers copies, the sweep and Secrets, never a
// function's own ConfigMaps, which it needs with projection off too.
func TestProjectionGrantCoversOnlyProjection(t *testing.T) {
	get := grant{resource: "configmaps", verb: "get", projection: true}
	create := grant{resource: "configmaps", verb: "create", projection: true}
	list := grant{resource: "configmaps", verb: "list", projection: true}
	secrets := grant{resource: "secrets", verb: "get", projection: true}
	for _, tt := range []struct {
		g    grant
		a    harness.Access
		want bool
	}{
		{get, harness.Access{Verb: "get", Resource: "configmaps", Namespace: "t", Name: "snap-x-ca"}, true},
		{get, harness.Access{Verb: "get", Resource: "configmaps", Namespace: "t", Name: "snap-x"}, false},
		{create, harness.Access{Verb: "create", Resource: "configmaps", Namespace: "t", Creates: "snap-x-ca"}, true},
		{create, harness.Access{Verb: "create", Resource: "configmaps", Namespace: "t", Creates: "snap-x"}, false},
		{list, harness.Access{Verb: "list", Resource: "configmaps", Namespace: "t"}, true},
		{secrets, harness.Access{Verb: "get", Resource: "secrets", Namespace: "t", Name: "anything"}, true},
		{grant{resource: "configmaps", verb: "get"}, harness.Access{Verb: "get", Resource: "configmaps", Namespace: "t", Name: "snap-x"}, true},
	} {
		if got := tt.g.covers(tt.a); got != tt.want {
			t.Errorf("%v covers %+v: %v, want %v", tt.g, tt.a, got, tt.want)
		}
	}
}
