package validate

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

func TestHooksAuthor(t *testing.T) {
	alice := HooksAuthor{Username: "alice", Groups: []string{"dev"}}
	const aliceJSON = `{"username":"alice","groups":["dev"]}`
	withHooks := func(author string, hooks ...snapv1.Hook) *snapv1.SnapshotPolicy {
		p := basePolicy()
		p.Spec.Hooks = &snapv1.Hooks{BeforeSnapshot: hooks}
		if author != "" {
			p.Annotations = map[string]string{wellknown.AnnotationHooksAuthor: author}
		}
		return p
	}
	job := snapv1.Hook{RunJob: &snapv1.RunJobHook{}}
	exec := snapv1.Hook{WorkloadExec: &snapv1.WorkloadExecHook{}}
	http := snapv1.Hook{HTTPRequest: &snapv1.HTTPRequestHook{URL: "https://example.invalid"}}
	withStream := func(p *snapv1.SnapshotPolicy) *snapv1.SnapshotPolicy {
		p.Spec.Sources = []snapv1.Source{streamSource("dump.sql")}
		return p
	}
	tests := []struct {
		name       string
		old, p     *snapv1.SnapshotPolicy
		controller bool
		want       string
	}{
		{"a runJob hook gets its writer", nil, withHooks("", job), false, aliceJSON},
		{"so does a workloadExec hook", nil, withHooks("", http, exec), false, aliceJSON},
		{"an httpRequest hook needs no rights", nil, withHooks("", http), false, ""},
		{"a stream source gets its writer", nil, withStream(withHooks("", http)), false, aliceJSON},
		{"no hooks, no author: a stale one goes", withHooks(`{"username":"bob"}`, job), withHooks(`{"username":"bob"}`), false, ""},
		{"any write makes the writer the author", withHooks(`{"username":"bob"}`, job), withHooks(`{"username":"bob"}`, job), false, aliceJSON},
		{"a forged author is replaced", nil, withHooks(`{"username":"admin"}`, job), false, aliceJSON},
		{"a controller keeps the author", withHooks(`{"username":"bob"}`, job), withHooks(`{"username":"bob"}`, job), true, `{"username":"bob"}`},
		{"a controller never becomes one", withHooks("", job), withHooks("", job), true, ""},
		{"a controller cannot set one", withHooks("", job), withHooks(aliceJSON, job), true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ExpectedHooksAuthor(tc.old, tc.p, alice, tc.controller)
			if err != nil || got != tc.want {
				t.Fatalf("author %q (%v), want %q", got, err, tc.want)
			}
			// The validating side refuses anything else on the object.
			ok := tc.p.Annotations[wellknown.AnnotationHooksAuthor] == tc.want
			if r := HooksAuthorProblem(tc.old, tc.p, alice, tc.controller); r.OK() != ok {
				t.Fatalf("validation OK=%v for annotation %q, want %v: %v", r.OK(), tc.p.Annotations[wellknown.AnnotationHooksAuthor], ok, r.Problems())
			} else if !ok && !strings.Contains(r.Errs.Error(), "metadata.annotations["+wellknown.AnnotationHooksAuthor+"]") {
				t.Fatalf("refusal does not name the annotation: %v", r.Errs)
			}
		})
	}

	if a, err := ParseHooksAuthor(withHooks(aliceJSON, job)); err != nil || a.Username != "alice" || a.Groups[0] != "dev" {
		t.Fatalf("parse %+v %v", a, err)
	}
	for _, bad := range []string{"", "alice", `{"groups":["dev"]}`} {
		if _, err := ParseHooksAuthor(withHooks(bad, job)); err == nil || !strings.Contains(err.Error(), "apply the policy again") {
			t.Fatalf("annotation %q: %v, want a refusal that says how to fix it", bad, err)
		}
	}
}

func TestRestoreAuthor(t *testing.T) {
	alice := HooksAuthor{Username: "alice"}
	stream := &snapv1.Restore{Spec: snapv1.RestoreSpec{Target: snapv1.RestoreTarget{StreamExec: &snapv1.StreamExecTarget{Command: []string{"psql"}}}}}
	pvc := &snapv1.Restore{Spec: snapv1.RestoreSpec{Target: snapv1.RestoreTarget{PVCRef: &snapv1.LocalObjectRef{Name: "data"}}}}
	if got, err := ExpectedRestoreAuthor(nil, stream, alice, false); err != nil || got != `{"username":"alice"}` {
		t.Fatalf("a streamExec target gets its writer: %q %v", got, err)
	}
	if got, _ := ExpectedRestoreAuthor(nil, pvc, alice, false); got != "" {
		t.Fatalf("a pvc target needs no author: %q", got)
	}
	if got, _ := ExpectedRestoreAuthor(nil, stream, alice, true); got != "" {
		t.Fatalf("a controller never becomes one: %q", got)
	}
	forged := stream.DeepCopy()
	forged.Annotations = map[string]string{wellknown.AnnotationExecAuthor: `{"username":"admin"}`}
	if r := RestoreAuthorProblem(nil, forged, alice, false); r.OK() {
		t.Fatal("a forged exec author must be refused")
	}
	if _, err := ParseRestoreAuthor(stream); err == nil || !strings.Contains(err.Error(), "apply the Restore again") {
		t.Fatalf("no author: %v", err)
	}
	// A source in another namespace is read with its writer's rights; its
	// own namespace, spelled out, needs no author.
	foreign := &snapv1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "billing"}, Spec: snapv1.RestoreSpec{Source: snapv1.RestoreSource{SnapshotRef: &snapv1.NamespacedObjectRef{Name: "s", Namespace: "payroll"}}}}
	if got, err := ExpectedRestoreAuthor(nil, foreign, alice, false); err != nil || got != `{"username":"alice"}` {
		t.Fatalf("a Snapshot of another namespace gets its writer: %q %v", got, err)
	}
	fromPolicy := &snapv1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "billing"}, Spec: snapv1.RestoreSpec{Source: snapv1.RestoreSource{FromPolicy: &snapv1.FromPolicy{Name: "app", Namespace: "payroll"}}}}
	if src := ForeignRestoreSource(fromPolicy); src == nil || !src.Policy || src.Namespace != "payroll" {
		t.Fatalf("a policy of another namespace: %+v", src)
	}
	own := foreign.DeepCopy()
	own.Spec.Source.SnapshotRef.Namespace = "billing"
	if got, _ := ExpectedRestoreAuthor(nil, own, alice, false); got != "" || ForeignRestoreSource(own) != nil {
		t.Fatalf("its own namespace needs no author: %q", got)
	}
}
