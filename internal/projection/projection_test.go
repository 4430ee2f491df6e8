package projection_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/projection"
)

const home = "snapflow-system"

// moverJob builds a real mover Job the way the functions do: password from
// one Secret, S3 keys from another, a CA bundle from a ConfigMap.
func moverJob(t *testing.T, withCA bool) moverjob.Params {
	t.Helper()
	p := moverjob.Params{
		Name: "nightly-1-abc", Namespace: "team-a", Image: "snapflow",
		Owner:          metav1.OwnerReference{APIVersion: "kopiur.home-operations.com/v1alpha1", Kind: "Snapshot", Name: "nightly-1", UID: "u1"},
		Work:           mover.WorkSpec{Operation: mover.OpSnapshot, Repository: mover.Repository{Backend: kopia.Backend{S3: &kopia.S3Backend{Bucket: "b"}}}},
		PasswordSecret: "repo-pass", PasswordKey: "password", CredentialsSecret: "repo-s3",
	}
	if withCA {
		p.CABundle = &snapv1.ConfigMapKeyRef{Name: "repo-ca", Key: "bundle.pem"}
	}
	return p
}

func sources() []client.Object {
	return []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "repo-pass"}, Data: map[string][]byte{"password": []byte("s3cret"), "other": []byte("not copied")}},
		// A key the mover does not read (here one that would redirect a
		// cloud client) is never copied or passed.
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "repo-s3"}, Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("AK"), "AWS_SECRET_ACCESS_KEY": []byte("SK"),
			"AWS_CONTAINER_CREDENTIALS_FULL_URI": []byte("http://evil.example/")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "repo-ca"}, Data: map[string]string{"bundle.pem": "PEM"}},
	}
}

func newClient(objs ...client.Object) client.Client {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func TestApply(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		homes   projection.Homes
		enabled bool
		ca      bool
		objs    []client.Object
		wantErr error
		wantMsg string
		// projected is whether the Job ends up reading copies.
		projected bool
	}{
		{name: "same namespace: nothing to copy", homes: projection.Homes{Default: "team-a"}, enabled: false, objs: sources()},
		{name: "no home (a Repository beside the run)", objs: sources()},
		{name: "one Secret elsewhere is enough to need consent", homes: projection.Homes{Default: "team-a", Secrets: map[string]string{"repo-pass": home}}, objs: sources(),
			wantErr: projection.ErrDisabled, wantMsg: "live in namespace snapflow-system"},
		{name: "another namespace without consent is refused", homes: projection.Homes{Default: home}, enabled: false, objs: sources(),
			wantErr: projection.ErrDisabled, wantMsg: "set spec.credentialProjection.enabled: true"},
		{name: "copies password and S3 keys", homes: projection.Homes{Default: home}, enabled: true, objs: sources(), projected: true},
		{name: "copies the CA bundle too", homes: projection.Homes{Default: home}, enabled: true, ca: true, objs: sources(), projected: true},
		{name: "a missing Secret names it", homes: projection.Homes{Default: home}, enabled: true, objs: sources()[1:],
			wantErr: projection.ErrSource, wantMsg: "Secret snapflow-system/repo-pass"},
		{name: "a missing key names it", homes: projection.Homes{Default: home}, enabled: true, objs: []client.Object{
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "repo-pass"}, Data: map[string][]byte{"pw": []byte("x")}}, sources()[1]},
			wantErr: projection.ErrSource, wantMsg: `has no key "password"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(tc.objs...)
			job, _, err := moverjob.Build(moverJob(t, tc.ca))
			if err != nil {
				t.Fatal(err)
			}
			err = projection.Apply(ctx, c, job, tc.homes, tc.enabled, "set spec.credentialProjection.enabled: true on SnapshotPolicy team-a/nightly")
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("err = %v, want %v containing %q", err, tc.wantErr, tc.wantMsg)
				}
				if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: projection.SecretName(job.Name)}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
					t.Fatalf("a refused projection left a copy: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ctr := job.Spec.Template.Spec.Containers[0]
			pass := ctr.Env[0].ValueFrom.SecretKeyRef
			if !tc.projected {
				if pass.Name != "repo-pass" {
					t.Fatalf("the Job was rewritten: %+v", pass)
				}
				return
			}
			// The Job reads only the copies, and the copies hold what it reads.
			var sec corev1.Secret
			if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: projection.SecretName(job.Name)}, &sec); err != nil {
				t.Fatal(err)
			}
			if pass.Name != sec.Name || string(sec.Data[pass.Key]) != "s3cret" {
				t.Fatalf("password ref %+v, copy %v", pass, sec.Data)
			}
			refs := map[string]string{}
			for _, e := range ctr.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					refs[e.Name] = e.ValueFrom.SecretKeyRef.Name
				}
			}
			if len(ctr.EnvFrom) != 0 || refs["AWS_ACCESS_KEY_ID"] != sec.Name || refs["AWS_SESSION_TOKEN"] != sec.Name ||
				string(sec.Data["AWS_ACCESS_KEY_ID"]) != "AK" || string(sec.Data["AWS_SECRET_ACCESS_KEY"]) != "SK" {
				t.Fatalf("env %+v (from %v), copy %v", ctr.Env, ctr.EnvFrom, sec.Data)
			}
			// The optional session token the source lacks stays absent.
			for _, k := range []string{"other", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_SESSION_TOKEN"} {
				if _, ok := sec.Data[k]; ok {
					t.Fatalf("%s was copied, though the Job does not read it from the source", k)
				}
			}
			if _, ok := refs["AWS_CONTAINER_CREDENTIALS_FULL_URI"]; ok {
				t.Fatal("a key the mover does not read became a variable")
			}
			if len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].UID != "u1" {
				t.Fatalf("copy owners = %+v", sec.OwnerReferences)
			}
			for _, v := range job.Spec.Template.Spec.Volumes {
				if v.ConfigMap == nil || v.ConfigMap.Name == job.Name {
					continue
				}
				var cm corev1.ConfigMap
				if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: v.ConfigMap.Name}, &cm); err != nil {
					t.Fatal(err)
				}
				if cm.Data[v.ConfigMap.Items[0].Key] != "PEM" || v.ConfigMap.Items[0].Path != "ca.crt" {
					t.Fatalf("CA volume %+v, copy %v", v.ConfigMap, cm.Data)
				}
			}
			// Applying again (a redelivered event) converges; Reap removes both.
			job2, _, _ := moverjob.Build(moverJob(t, tc.ca))
			if err := projection.Apply(ctx, c, job2, tc.homes, true, ""); err != nil {
				t.Fatal(err)
			}
			if err := projection.Reap(ctx, c, "team-a", job.Name); err != nil {
				t.Fatal(err)
			}
			if err := projection.Reap(ctx, c, "team-a", job.Name); err != nil {
				t.Fatalf("a second reap: %v", err)
			}
			var left corev1.SecretList
			_ = c.List(ctx, &left, client.InNamespace("team-a"))
			var cms corev1.ConfigMapList
			_ = c.List(ctx, &cms, client.InNamespace("team-a"))
			if len(left.Items) != 0 || len(cms.Items) != 0 {
				t.Fatalf("left after reap: %d Secrets, %d ConfigMaps", len(left.Items), len(cms.Items))
			}
		})
	}
}

func TestSweep(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	copyFor := func(job string, age time.Duration) client.Object {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: projection.SecretName(job),
			CreationTimestamp: metav1.NewTime(now.Add(-age)), Labels: map[string]string{"snapflow.dev/projected-for": job}}}
	}
	job := func(name string, done bool) client.Object {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}}
		if done {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		}
		return j
	}
	c := newClient(
		copyFor("running", time.Hour), job("running", false),
		copyFor("finished", time.Hour), job("finished", true),
		copyFor("about-to-start", 10*time.Second),
		copyFor("long-gone", time.Hour),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "users-own"}},
	)
	if err := projection.Sweep(ctx, c, "team-a", now); err != nil {
		t.Fatal(err)
	}
	var left corev1.SecretList
	if err := c.List(ctx, &left, client.InNamespace("team-a")); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range left.Items {
		names = append(names, s.Name)
	}
	want := "about-to-start-creds,running-creds,users-own"
	if got := strings.Join(names, ","); got != want {
		t.Fatalf("left %s, want %s", got, want)
	}
}
