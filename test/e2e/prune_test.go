package e2e

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/kubeinv"
	"github.com/snapflow/snapflow/test/harness"
)

// pruneWorld is one KubeBlocks BackupRepo in Mount mode on the real API
// server, with its own bucket on the suite's versitygw: the Backup PVC and
// its bound PV (root R), a Released repository PV (historical root H), a
// user PVC (root U) and an unowned root O.
type pruneWorld struct {
	t                    *testing.T
	ctx                  context.Context
	bucket, repo, ns     string
	sc                   string
	R, H, O, U           string
	clusterDir, otherDir string
	clusterUID           string
	s3                   *s3.Client
	old                  time.Time
	accessKey, secretKey string
	sessionToken         string
	// pvcName is the repo's Backup PVC name; KubeBlocks makes it unique per
	// repo, and a shared name would make each world block the others.
	pvcName string
	repoUID string
}

func randomUUID(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// pruneSecret is each prune world's credential Secret, which the prune
// ServiceAccount may read by name.
const pruneSecret = "gen-cred"

func newPruneWorld(t *testing.T, versioned bool, sessionToken string) *pruneWorld {
	t.Helper()
	n := randomUUID(t)[:8]
	w := &pruneWorld{t: t, ctx: testContext(t), bucket: "prune-" + n, repo: "prune-repo-" + n, ns: "prune-app-" + n, sc: "sc-prune-" + n,
		R: "pvc-" + randomUUID(t), H: "pvc-" + randomUUID(t), O: "pvc-" + randomUUID(t), clusterUID: randomUUID(t),
		old: time.Now().Add(-30 * 24 * time.Hour), accessKey: env.S3.AccessKey, secretKey: env.S3.SecretKey, sessionToken: sessionToken}
	w.clusterDir = "pg-" + w.clusterUID
	w.pvcName = "pvc-" + w.repo
	w.otherDir = "old-" + randomUUID(t)
	w.s3 = s3.New(s3.Options{Region: env.S3.Region, BaseEndpoint: aws.String(env.S3.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(env.S3.AccessKey, env.S3.SecretKey, "")})
	if _, err := w.s3.CreateBucket(w.ctx, &s3.CreateBucketInput{Bucket: aws.String(w.bucket)}); err != nil {
		t.Fatal(err)
	}
	if versioned {
		if _, err := w.s3.PutBucketVersioning(w.ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(w.bucket),
			VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
			t.Fatal(err)
		}
	}
	w.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}})
	secret := map[string]string{"accessKeyId": w.accessKey, "secretAccessKey": w.secretKey, "endpoint": env.S3.URL, "region": env.S3.Region}
	if sessionToken != "" {
		secret["sessionToken"] = sessionToken
	}
	w.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: pruneSecret}, StringData: secret})
	// The prune function may read it as the chart lets it when the
	// operator lists it in prune.secretReader.secrets: by name only.
	w.create(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: chartRelease + "-prune-secrets"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{pruneSecret}, Verbs: []string{"get"}}}})
	w.create(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: chartRelease + "-prune-secrets"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: chartRelease + "-prune-secrets"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: harness.WebhookNamespace, Name: chartRelease + "-prune"}}})
	w.create(&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: w.sc}, Provisioner: prune.CSIDriverS3,
		Parameters: map[string]string{"bucket": w.bucket}})
	w.volume(w.R, w.ns, w.pvcName, corev1.VolumeBound)
	w.volume(w.H, w.ns, w.pvcName, corev1.VolumeReleased)
	pvc := func(name, sc, volume string, labels map[string]string) *corev1.PersistentVolumeClaim {
		p := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name, Labels: labels},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc, VolumeName: volume,
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		w.create(p)
		return p
	}
	pvc(w.pvcName, w.sc, w.R, map[string]string{prune.LabelBackupRepoName: w.repo})
	w.U = "pvc-" + string(pvc("data", "standard", "", nil).UID)

	repo := kb(kubeinv.GVKBackupRepo, "", w.repo, map[string]any{"spec": map[string]any{
		"storageProviderRef": "s3", "pvReclaimPolicy": "Retain", "config": map[string]any{"bucket": w.bucket}}})
	w.create(repo)
	w.repoUID = string(repo.GetUID())
	w.setStatus(repo, map[string]any{"generatedStorageClassName": w.sc, "backupPVCName": w.pvcName,
		"generatedCSIDriverSecret": map[string]any{"namespace": w.ns, "name": pruneSecret}})
	return w
}

// volume creates a PV of the repository's StorageClass whose prefix is
// its own name, claimed by claimNS/claimName, in phase.
func (w *pruneWorld) volume(name, claimNS, claimName string, phase corev1.PersistentVolumePhase) {
	w.t.Helper()
	obj := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		StorageClassName: w.sc, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
		ClaimRef:                      &corev1.ObjectReference{Namespace: claimNS, Name: claimName},
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: prune.CSIDriverS3, VolumeHandle: w.bucket + "/" + name}},
	}}
	w.create(obj)
	obj.Status.Phase = phase
	if err := env.Client.Status().Update(w.ctx, obj); err != nil {
		w.t.Fatal(err)
	}
}

// create creates obj and deletes it after the test, so no other test sees
// this world's PVs, StorageClass, BackupRepo or claims.
func (w *pruneWorld) create(obj client.Object) {
	w.t.Helper()
	if err := env.Client.Create(w.ctx, obj); err != nil {
		w.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
	w.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
}

// kb builds a KubeBlocks object; status is set separately, as the CRDs
// have a status subresource.
func kb(gvk schema.GroupVersionKind, ns, name string, obj map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// setStatus writes status on a created KubeBlocks object.
func (w *pruneWorld) setStatus(u *unstructured.Unstructured, status map[string]any) {
	w.t.Helper()
	u.Object["status"] = status
	if err := env.Client.Status().Update(w.ctx, u); err != nil {
		w.t.Fatalf("status of %s: %v", u.GetName(), err)
	}
}

// put writes one object; old ones are back-dated on versitygw's disk, so
// the listing reports them 30 days old.
func (w *pruneWorld) put(key, body string, old bool) {
	w.t.Helper()
	if _, err := w.s3.PutObject(w.ctx, &s3.PutObjectInput{Bucket: aws.String(w.bucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
		w.t.Fatal(err)
	}
	if old {
		if err := os.Chtimes(filepath.Join(env.S3.DataDir, w.bucket, key), w.old, w.old); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *pruneWorld) backupDir(name string) string {
	return w.R + "/" + w.ns + "/" + w.clusterDir + "/pg/" + name
}

// seedBackup writes a valid backup manifest for the backup directory of
// name with policy (a Backup of the repo named after the directory, with
// the cluster-uid label and status.path pointing at it) and one data object.
func (w *pruneWorld) seedBackup(name, policy string, old bool) {
	w.t.Helper()
	dir := w.backupDir(name)
	m, _ := json.Marshal(map[string]any{
		"apiVersion": prune.ManifestAPIVersion, "kind": "Backup",
		"metadata": map[string]any{"name": name, "namespace": w.ns, "uid": "uid-" + name, "creationTimestamp": w.old.Format(time.RFC3339),
			"labels": map[string]any{prune.LabelClusterUID: w.clusterUID}},
		"spec":   map[string]any{"deletionPolicy": policy},
		"status": map[string]any{"path": "/" + strings.TrimPrefix(dir, w.R+"/"), "backupRepoName": w.repo},
	})
	w.put(dir+"/"+prune.DefaultManifestName, string(m), old)
	w.put(dir+"/data.tar.zst", "data-"+name, old)
}

// liveBackup creates the KubeBlocks Backup CR name of this repo.
func (w *pruneWorld) liveBackup(name string) {
	w.t.Helper()
	u := kb(kubeinv.GVKBackup, w.ns, name, map[string]any{
		"metadata": map[string]any{"labels": map[string]any{prune.LabelClusterUID: w.clusterUID}},
		"spec":     map[string]any{"backupPolicyName": "pg-policy", "backupMethod": "dump"}})
	w.create(u)
	w.setStatus(u, map[string]any{"phase": "Completed", "backupRepoName": w.repo, "path": "/" + strings.TrimPrefix(w.backupDir(name), w.R+"/")})
}

// keys lists every version left in the bucket.
func (w *pruneWorld) keys() []string {
	w.t.Helper()
	out, err := w.s3.ListObjectVersions(w.ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(w.bucket)})
	if err != nil {
		w.t.Fatal(err)
	}
	var keys []string
	for _, v := range out.Versions {
		keys = append(keys, aws.ToString(v.Key))
	}
	slices.Sort(keys)
	return keys
}

func (w *pruneWorld) prune(args ...string) (string, string, int) {
	w.t.Helper()
	return runSnapflow(w.t, append([]string{"prune"}, append(args, "--backup-repo", w.repo, "--path-style")...)...)
}

type prunePlanJSON struct {
	Plan struct {
		Candidates []struct {
			Type   string `json:"type"`
			State  string `json:"state"`
			Prefix string `json:"prefix"`
			Reason string `json:"reason"`
			Count  int    `json:"objectCount"`
		} `json:"candidates"`
		Versioning       string `json:"versioning"`
		VolumeRootCounts struct {
			Total, Repository, ProtectedUser, Unowned int
		} `json:"volumeRootCounts"`
		BlockingReasons []string `json:"blockingReasons"`
	} `json:"plan"`
	Execution *struct {
		DryRun  bool `json:"dryRun"`
		Results []struct {
			Prefix string `json:"prefix"`
			Error  string `json:"error"`
		} `json:"results"`
	} `json:"execution"`
}

func parsePrunePlan(t *testing.T, out string) prunePlanJSON {
	t.Helper()
	var p prunePlanJSON
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("decode %v:\n%s", err, out)
	}
	return p
}

// states maps each candidate prefix to "type state".
func (p prunePlanJSON) states() map[string]string {
	out := map[string]string{}
	for _, c := range p.Plan.Candidates {
		out[c.Prefix] = c.Type + " " + c.State
	}
	return out
}

// assertNoSecrets fails when any credential byte sequence reached the
// output.
func (w *pruneWorld) assertNoSecrets(outputs ...string) {
	w.t.Helper()
	for _, out := range outputs {
		for _, secret := range []string{w.secretKey, w.accessKey, w.sessionToken, "Signature="} {
			if secret != "" && strings.Contains(out, secret) {
				w.t.Fatalf("output contains %q:\n%s", secret, out)
			}
		}
	}
}

// TestPruneEndToEnd plans and prunes one repository: live, retained,
// young and restore-referenced backups survive, a Backup CR created
// between plan and prune saves its backup, and the orphans (a backup, an
// unowned root, a historical root) are deleted.
func TestPruneEndToEnd(t *testing.T) {
	w := newPruneWorld(t, false, "")
	w.seedBackup("b-live", "Delete", true)
	w.liveBackup("b-live")
	w.seedBackup("b-orphan", "Delete", true)
	w.seedBackup("b-retained", "Retain", true)
	w.seedBackup("b-young", "Delete", false)
	w.seedBackup("b-restore", "Delete", true)
	w.create(kb(kubeinv.GVKRestore, w.ns, "restore-1", map[string]any{"spec": map[string]any{
		"backup": map[string]any{"name": "b-restore", "namespace": w.ns}}}))
	w.seedBackup("b-late", "Delete", true)
	// A truncated manifest keeps its own backup and freezes nothing else
	// of its cluster.
	w.put(w.backupDir("b-broken")+"/"+prune.DefaultManifestName, "{", true)
	w.put(w.backupDir("b-broken")+"/data.tar.zst", "data-b-broken", true)
	w.put(w.O+"/ns/c/data", "unowned", true)
	w.put(w.U+"/file", "user data", true)
	hist := w.H + "/gone-ns/" + w.otherDir + "/pg/h1/data"
	w.put(hist, "historical", true)
	// KubeBlocks' pre-check PVC of the repo, gone: its Released volume is a
	// historical root of the repository, not a protection.
	preCheck, ok := prune.PreCheckPVCName(w.repo, w.repoUID)
	if !ok {
		t.Fatalf("no pre-check PVC name for repo UID %q", w.repoUID)
	}
	P := "pvc-" + randomUUID(t)
	w.volume(P, "kb-system", preCheck, corev1.VolumeReleased)
	probe := P + "/probe"
	w.put(probe, "pre-check probe", true)
	w.put("unrelated/x", "not a pvc root", true)

	out, errOut, code := w.prune("plan", "-o", "json", "--show-all", "--debug")
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, errOut)
	}
	w.assertNoSecrets(out, errOut)
	for _, want := range []string{"debug: credential_source=status.generatedCSIDriverSecret", "debug: access_key_id masked=", "debug: s3 bucket=" + w.bucket, "CANONICAL"} {
		if !strings.Contains(errOut, want) {
			t.Fatalf("stderr misses %q:\n%s", want, errOut)
		}
	}
	p := parsePrunePlan(t, out)
	if rc := p.Plan.VolumeRootCounts; rc.Total != 5 || rc.Repository != 3 || rc.ProtectedUser != 1 || rc.Unowned != 1 || len(p.Plan.BlockingReasons) != 0 {
		t.Fatalf("roots %+v, blockers %v", rc, p.Plan.BlockingReasons)
	}
	want := map[string]string{
		w.backupDir("b-live"): "backup live", w.backupDir("b-orphan"): "backup orphan", w.backupDir("b-retained"): "backup retained",
		w.backupDir("b-young"): "backup too-young", w.backupDir("b-restore"): "backup protected", w.backupDir("b-late"): "backup orphan",
		w.O: "orphan-volume-root orphan", w.U: "protected-user-volume protected", w.H: "orphan-repository-root orphan",
		P: "orphan-repository-root orphan",
	}
	want[w.backupDir("b-broken")] = "backup invalid-manifest"
	got := p.states()
	for prefix, st := range want {
		if got[prefix] != st {
			t.Errorf("%s: %q, want %q", prefix, got[prefix], st)
		}
	}
	if t.Failed() {
		t.Fatalf("plan:\n%s", out)
	}
	table, _, code := w.prune("plan")
	if code != 0 || !strings.Contains(table, "Discovered PVC roots: 5 (repository: 3, protected user: 1, unowned: 1, other: 0)") ||
		strings.Contains(table, "b-live") || !strings.Contains(table, "- invalid-manifest backup "+w.backupDir("b-broken")+": invalid manifest") {
		t.Fatalf("table (exit %d):\n%s", code, table)
	}
	if _, _, code := w.prune("plan", "--fail-on-orphans"); code != 2 {
		t.Fatalf("--fail-on-orphans: exit %d, want 2", code)
	}

	// A Backup CR appears between plan and prune.
	w.liveBackup("b-late")
	if _, errOut, code := w.prune("prune", "--dry-run=false"); code != 1 || !strings.Contains(errOut, "--confirm DELETE") {
		t.Fatalf("no confirmation: exit %d %s", code, errOut)
	}
	before := w.keys()
	dry, _, code := w.prune("prune")
	if code != 0 || !strings.Contains(dry, "Mode: dry-run") || !strings.Contains(dry, "Would delete: 3 objects") || !strings.Contains(dry, "plus 2 deferred roots") || !slices.Equal(w.keys(), before) {
		t.Fatalf("dry run (exit %d):\n%s", code, dry)
	}
	out, errOut, code = w.prune("prune", "--dry-run=false", "--confirm", "DELETE", "-o", "json")
	if code != 0 {
		t.Fatalf("prune: exit %d\n%s\n%s", code, out, errOut)
	}
	w.assertNoSecrets(out, errOut)
	left := w.keys()
	for _, gone := range []string{w.backupDir("b-orphan") + "/data.tar.zst", w.backupDir("b-orphan") + "/" + prune.DefaultManifestName, w.O + "/ns/c/data", hist, probe} {
		if slices.Contains(left, gone) {
			t.Errorf("%s survived", gone)
		}
	}
	for _, name := range []string{"b-live", "b-retained", "b-young", "b-restore", "b-late", "b-broken"} {
		for _, f := range []string{"/data.tar.zst", "/" + prune.DefaultManifestName} {
			if !slices.Contains(left, w.backupDir(name)+f) {
				t.Errorf("%s%s was deleted", w.backupDir(name), f)
			}
		}
	}
	for _, keep := range []string{w.U + "/file", "unrelated/x"} {
		if !slices.Contains(left, keep) {
			t.Errorf("%s was deleted", keep)
		}
	}
	if res := parsePrunePlan(t, out).Execution; res == nil || res.DryRun || len(res.Results) != 4 {
		t.Fatalf("execution %+v", res)
	}
}

// TestPruneVersionedOverwriteSurvives: on a versioned bucket an object
// overwritten after the plan survives with every version (the new version
// makes its root too young at execution), while an untouched orphan root is
// purged by exact VersionId.
func TestPruneVersionedOverwriteSurvives(t *testing.T) {
	w := newPruneWorld(t, true, "")
	other := "pvc-" + randomUUID(t)
	w.put(w.O+"/x", "v1", true)
	w.put(other+"/y", "y", true)
	out, errOut, code := w.prune("plan", "-o", "json", "--purge-versions")
	if code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	p := parsePrunePlan(t, out)
	if p.Plan.Versioning != "Enabled" || p.states()[w.O] != "orphan-volume-root orphan" || p.states()[other] != "orphan-volume-root orphan" {
		t.Fatalf("plan:\n%s", out)
	}
	if _, errOut, code := w.prune("prune", "--dry-run=false", "--confirm", "DELETE"); code != 1 || !strings.Contains(errOut, "--purge-versions") {
		t.Fatalf("versioned deletion needs --purge-versions: exit %d %s", code, errOut)
	}
	w.put(w.O+"/x", "v2", false) // the overwrite after the scan
	out, errOut, code = w.prune("prune", "--dry-run=false", "--confirm", "DELETE", "--purge-versions")
	if code != 0 {
		t.Fatalf("prune: exit %d\n%s\n%s", code, out, errOut)
	}
	if left := w.keys(); !slices.Equal(left, []string{w.O + "/x", w.O + "/x"}) {
		t.Fatalf("left %v\n%s", left, out)
	}
}

// TestPruneDebugNeverPrintsSecrets: with a session token (which versitygw
// refuses, so the run fails on its first S3 request) neither the access
// key, the secret, the token nor a signature reaches stdout or stderr,
// while the masked diagnostics do.
func TestPruneDebugNeverPrintsSecrets(t *testing.T) {
	w := newPruneWorld(t, false, "tok-"+randomUUID(t))
	w.put(w.O+"/x", "x", true)
	out, errOut, code := w.prune("plan", "--debug")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (the token is refused)\n%s\n%s", code, out, errOut)
	}
	w.assertNoSecrets(out, errOut)
	for _, want := range []string{"debug: access_key_id masked=snap...test", "debug: session_token present=true", "debug: secret_access_key present=true",
		"debug: credential_keys=accessKeyId,endpoint,region,secretAccessKey,sessionToken", "x-amz-security-token:<redacted>"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr misses %q", want)
		}
	}
	// The refusal names the endpoint and the credentials, and where each
	// came from, not the SDK's chain alone.
	if !strings.Contains(errOut, "refused the credentials from Secret ") || !strings.Contains(errOut, "(from credential Secret ") {
		t.Errorf("the refusal does not say whose credentials and endpoint:\n%s", errOut)
	}
	if t.Failed() {
		t.Log(errOut)
	}
	// An endpoint nothing listens on says so, and that it came from the flag.
	_, errOut, code = w.prune("plan", "--endpoint", "http://127.0.0.1:1")
	if code != 1 || !strings.Contains(errOut, "cannot reach S3 endpoint http://127.0.0.1:1 (from --endpoint)") {
		t.Fatalf("a wrong endpoint: exit %d\n%s", code, errOut)
	}
}
