package kubeinv

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/snapflow/snapflow/internal/prune"
)

const (
	rootR = "pvc-11111111-1111-4111-8111-111111111111"
	rootU = "pvc-22222222-2222-4222-8222-222222222222"
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, gvk := range []schema.GroupVersionKind{GVKBackupRepo, GVKBackup, GVKRestore} {
		s.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
		s.AddKnownTypeWithName(gvk.GroupVersion().WithKind(gvk.Kind+"List"), &unstructured.UnstructuredList{})
	}
	return s
}

func kb(gvk schema.GroupVersionKind, ns, name string, obj map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	return u
}

// repoObj is the test BackupRepo "repo" (bucket bkt, generated StorageClass
// sc-repo, Backup PVC pvc-repo-x, both credential refs set); mut may edit it.
func repoObj(mut func(map[string]any)) *unstructured.Unstructured {
	obj := map[string]any{
		"spec": map[string]any{
			"config":     map[string]any{"bucket": "bkt", "endpoint": "https://s3.example.test", "region": "eu-west-1"},
			"credential": map[string]any{"namespace": "kb-system", "name": "user-cred"},
		},
		"status": map[string]any{
			"generatedStorageClassName": "sc-repo", "backupPVCName": "pvc-repo-x",
			"generatedCSIDriverSecret": map[string]any{"namespace": "kb-system", "name": "gen-cred"},
		},
	}
	if mut != nil {
		mut(obj)
	}
	return kb(GVKBackupRepo, "", "repo", obj)
}

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kb-system", Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func cluster(t *testing.T, objs ...client.Object) (*Source, *countingReader) {
	t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc-repo"}, Provisioner: prune.CSIDriverS3, Parameters: map[string]string{"bucket": "bkt"}}
	scName := "sc-repo"
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "pvc-repo-x", UID: types.UID(strings.TrimPrefix(rootR, "pvc-")),
		Labels: map[string]string{prune.LabelBackupRepoName: "repo"}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &scName, VolumeName: rootR}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: rootR}, Spec: corev1.PersistentVolumeSpec{StorageClassName: "sc-repo",
		ClaimRef:               &corev1.ObjectReference{Namespace: "app", Name: "pvc-repo-x"},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: prune.CSIDriverS3, VolumeHandle: "bkt/" + rootR}}},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}}
	userPVC := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "data", UID: types.UID(strings.TrimPrefix(rootU, "pvc-"))}}
	all := append([]client.Object{sc, pvc, pv, userPVC}, objs...)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(all...).Build()
	cr := &countingReader{Reader: c}
	return &Source{Client: cr, Repo: "repo"}, cr
}

// countingReader records which Secrets were read.
type countingReader struct {
	client.Reader
	secretGets []string
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok {
		c.secretGets = append(c.secretGets, key.String())
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

func TestInventoryFromCluster_9_6(t *testing.T) {
	backup := kb(GVKBackup, "app", "b1", map[string]any{
		"spec":   map[string]any{"parentBackupName": "b0"},
		"status": map[string]any{"backupRepoName": "repo", "path": "/app/c/pg/b1", "kopiaRepoPath": "/app/c/pg/kopia", "baseBackupName": "base"},
	})
	other := kb(GVKBackup, "app", "x", map[string]any{"status": map[string]any{"backupRepoName": "another"}})
	restore := kb(GVKRestore, "app", "r1", map[string]any{"spec": map[string]any{"backup": map[string]any{"namespace": "app", "name": "gone"}}})
	done := kb(GVKRestore, "app", "r2", map[string]any{"spec": map[string]any{"backup": map[string]any{"namespace": "app", "name": "old"}},
		"status": map[string]any{"phase": "Completed"}})
	src, _ := cluster(t, repoObj(nil), backup, other, restore, done)
	inv, err := src.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Blockers) != 0 {
		t.Fatalf("blockers %v", inv.Blockers)
	}
	if inv.Mapping["app"] != rootR || inv.Repo.Bucket != "bkt" || inv.Repo.UID != "uid-repo" {
		t.Fatalf("mapping %v repo %+v", inv.Mapping, inv.Repo)
	}
	lb, ok := inv.Backups[prune.BackupKey{Namespace: "app", Name: "b1"}]
	if !ok || len(inv.Backups) != 1 || lb.Parent != "b0" || lb.Base != "base" || lb.PathQualified != rootR+"/app/c/pg/b1" {
		t.Fatalf("backups %+v", inv.Backups)
	}
	if !inv.RestoreProtected[prune.BackupKey{Namespace: "app", Name: "gone"}] || len(inv.RestoreProtected) != 1 {
		t.Fatalf("restores %v", inv.RestoreProtected)
	}
	if o := inv.Owners[rootU]; o.Kind != prune.OwnerUser {
		t.Fatalf("user root owner %+v", o)
	}
	if o := inv.Owners[rootR]; o.Kind != prune.OwnerRepository || !o.Current {
		t.Fatalf("repo root owner %+v", o)
	}
}

func TestStorageClassMissingIsABlocker_4_2(t *testing.T) {
	src, _ := cluster(t, repoObj(func(o map[string]any) {
		o["status"].(map[string]any)["generatedStorageClassName"] = "gone"
	}))
	inv, err := src.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Blockers) == 0 {
		t.Fatal("an unreadable StorageClass must block execution")
	}
	if _, err := (&Source{Client: src.Client, Repo: "missing"}).Inventory(context.Background()); err == nil {
		t.Fatal("a missing BackupRepo is fatal")
	}
}

// S3 settings: which credential Secret is read (the generated one, else
// spec.credential, none for the default chain), what a bad Secret or a
// bucket mismatch does, and where endpoint, region and TLS come from.
func TestResolveS3_9_2(t *testing.T) {
	good := map[string]string{"accessKeyID": "AKIAGENERATED1234", "secretAccessKey": "gen-secret", "endpoint": "https://gen.example.test"}
	tests := []struct {
		name       string
		mutRepo    func(map[string]any)
		secrets    []*corev1.Secret
		flags      S3Flags
		wantErr    string
		wantSource string
		wantGets   int
		check      func(t *testing.T, s S3Settings)
	}{
		{name: "generated secret first", secrets: []*corev1.Secret{secret("gen-cred", good)}, flags: S3Flags{UseRepoCredentials: true},
			wantSource: SourceGeneratedSecret, wantGets: 1, check: func(t *testing.T, s S3Settings) {
				if s.Endpoint != "https://gen.example.test" || s.Region != "eu-west-1" || s.Bucket != "bkt" || s.CredentialRef != "kb-system/gen-cred" {
					t.Fatalf("%+v", s)
				}
				if strings.Join(s.CredentialKeys, ",") != "accessKeyID,endpoint,secretAccessKey" {
					t.Fatalf("keys %v", s.CredentialKeys)
				}
			}},
		{name: "case76 spec.credential when the status ref is null", mutRepo: func(o map[string]any) {
			delete(o["status"].(map[string]any), "generatedCSIDriverSecret")
		}, secrets: []*corev1.Secret{secret("user-cred", map[string]string{"AWS_ACCESS_KEY_ID": "AKIAUSER00001234", "AWS_SECRET_ACCESS_KEY": "s", "AWS_SESSION_TOKEN": "tok"})},
			flags: S3Flags{UseRepoCredentials: true, Endpoint: "https://flag.example.test", Region: "ap-1"}, wantSource: SourceSpecCredential, wantGets: 1,
			check: func(t *testing.T, s S3Settings) {
				if s.Endpoint != "https://flag.example.test" || s.Region != "ap-1" || s.Secrets()[2] != "tok" {
					t.Fatalf("%+v", s)
				}
			}},
		{name: "case76 both refs null", mutRepo: func(o map[string]any) {
			delete(o["status"].(map[string]any), "generatedCSIDriverSecret")
			delete(o["spec"].(map[string]any), "credential")
		}, flags: S3Flags{UseRepoCredentials: true}, wantErr: "neither"},
		{name: "case77 secret lacks secretAccessKey", secrets: []*corev1.Secret{secret("gen-cred", map[string]string{"accessKeyId": "AKIA1234567890"})},
			flags: S3Flags{UseRepoCredentials: true}, wantErr: "lacks", wantGets: 1},
		{name: "secret cannot be read", flags: S3Flags{UseRepoCredentials: true}, wantErr: "read credential Secret", wantGets: 1},
		{name: "case78 default chain reads no Secret", flags: S3Flags{}, wantSource: SourceDefaultChain, wantGets: 0,
			check: func(t *testing.T, s S3Settings) {
				if s.StoreConfig().Credentials != nil || s.Endpoint != "https://s3.example.test" {
					t.Fatalf("%+v", s)
				}
			}},
		{name: "case79 bucket mismatch", flags: S3Flags{Bucket: "other"}, wantErr: "differs"},
		{name: "insecure from config", mutRepo: func(o map[string]any) {
			o["spec"].(map[string]any)["config"].(map[string]any)["no_check_certificate"] = "true"
		}, flags: S3Flags{}, wantSource: SourceDefaultChain, check: func(t *testing.T, s S3Settings) {
			if !s.InsecureTLS {
				t.Fatal("no_check_certificate=true must skip TLS verification")
			}
		}},
		{name: "invalid endpoint", flags: S3Flags{Endpoint: "s3.example.test"}, wantErr: "invalid S3 endpoint"},
		{name: "bucket from the StorageClass", mutRepo: func(o map[string]any) {
			delete(o["spec"].(map[string]any)["config"].(map[string]any), "bucket")
		}, flags: S3Flags{}, wantSource: SourceDefaultChain, check: func(t *testing.T, s S3Settings) {
			if s.Bucket != "bkt" {
				t.Fatalf("bucket %q", s.Bucket)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []client.Object{repoObj(tt.mutRepo)}
			for _, s := range tt.secrets {
				objs = append(objs, s)
			}
			src, cr := cluster(t, objs...)
			repo, err := src.GetRepo(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			s, err := src.ResolveS3(context.Background(), repo, tt.flags)
			if len(cr.secretGets) != tt.wantGets {
				t.Fatalf("secret GETs %v, want %d", cr.secretGets, tt.wantGets)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.CredentialSource != tt.wantSource {
				t.Fatalf("source %s", s.CredentialSource)
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}

// Formatting the settings never shows a credential.
func TestSettingsNeverFormatSecrets(t *testing.T) {
	src, _ := cluster(t, repoObj(nil), secret("gen-cred", map[string]string{"accessKeyId": "ACCESSKEY1234", "secretAccessKey": "very-secret-value", "sessionToken": "token-value-xyz"}))
	repo, _ := src.GetRepo(context.Background())
	s, err := src.ResolveS3(context.Background(), repo, S3Flags{UseRepoCredentials: true})
	if err != nil {
		t.Fatal(err)
	}
	out := fmt.Sprintf("%v %+v %#v %s %s", s, s, s, s, strings.Join(s.DebugLines(), "\n"))
	for _, secret := range []string{"ACCESSKEY1234", "very-secret-value", "token-value-xyz"} {
		if strings.Contains(out, secret) {
			t.Fatalf("formatted settings contain %q:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, "ACCE...1234") {
		t.Fatalf("masked key missing:\n%s", out)
	}
}
