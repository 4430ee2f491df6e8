package e2e

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/test/backendsrv"
	"github.com/snapflow/snapflow/test/harness"
)

// backendNamespace applies a namespace with an app-data PVC holding n
// files, a Secret "creds" (the kopia password and secret), and a Repository
// named primary with backend, created on first connect.
func backendNamespace(t *testing.T, ns, secret, backend string) {
	t.Helper()
	kubectl(t, []byte(fmt.Sprintf(`
apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: %[1]s}
stringData:
  KOPIA_PASSWORD: correct-horse
%[2]s
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: app-data, namespace: %[1]s}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: primary, namespace: %[1]s}
spec:
  backend: %[3]s
  encryption: {passwordSecretRef: {name: creds, key: KOPIA_PASSWORD}}
  create: {enabled: true}
`, ns, secret, backend)), 0, "apply", "-f", "-")
}

// backUpAndRestore takes a Snapshot of app-data through the Repository
// primary, restores it into a new PVC and compares the bytes.
func backUpAndRestore(t *testing.T, ns, kind string) {
	t.Helper()
	src := env.Functions.Node.PVCDir(ns, "app-data")
	writeFiles(t, src, 12)
	if r := waitRepository(t, ns, "primary", snapv1.RepositoryReady); r.Status.Backend != kind || r.Status.UniqueID == "" {
		t.Fatalf("repository status %+v, want backend %s and a unique id", r.Status, kind)
	}
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "first", "app"), 0, "create", "-f", "-")
	s := waitSnapshot(t, ns, "first", snapv1.SnapshotSucceeded)
	if *s.Status.Stats.FilesNew != 12 {
		t.Fatalf("stats %+v", s.Status.Stats)
	}
	kubectl(t, restoreOf(ns, "back", "{snapshotRef: {name: first}}", "{pvc: {name: restored, capacity: 1Gi}}"), 0, "apply", "-f", "-")
	waitRestore(t, ns, "back", snapv1.RestoreCompleted)
	sameFiles(t, tree(t, src), tree(t, env.Functions.Node.PVCDir(ns, "restored")), true)
}

// refused applies a second Repository "bad" whose Secret "bad-creds"
// holds secret, and waits for it to fail with class and a message saying says.
func refused(t *testing.T, ns, secret, backend, class, says string) {
	t.Helper()
	kubectl(t, []byte(fmt.Sprintf(`
apiVersion: v1
kind: Secret
metadata: {name: bad-creds, namespace: %[1]s}
stringData:
  KOPIA_PASSWORD: correct-horse
%[2]s
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: bad, namespace: %[1]s}
spec:
  backend: %[3]s
  encryption: {passwordSecretRef: {name: bad-creds, key: KOPIA_PASSWORD}}
  create: {enabled: true}
`, ns, secret, backend)), 0, "apply", "-f", "-")
	r := waitRepository(t, ns, "bad", snapv1.RepositoryFailed)
	c := meta.FindStatusCondition(r.Status.Conditions, wellknown.ConditionReady)
	if c == nil || c.Reason != class || !strings.Contains(c.Message, says) {
		t.Fatalf("Ready %+v: want reason %s saying %q", c, class, says)
	}
}

// A WebDAV server with basic authentication holds a repository: a backup
// and a restore go through it, and a wrong password is named as such.
func TestBackupToWebDAV(t *testing.T) {
	const ns = "backend-webdav"
	srv := backendsrv.StartWebDAV(t.TempDir(), "backup", "dav-secret")
	t.Cleanup(srv.Close)
	backend := fmt.Sprintf("{webDav: {url: %q, auth: {secretRef: {name: %%s}}}}", srv.URL+"/snapflow/team-a")
	backendNamespace(t, ns, "  KOPIA_WEBDAV_USERNAME: backup\n  KOPIA_WEBDAV_PASSWORD: dav-secret", fmt.Sprintf(backend, "creds"))
	backUpAndRestore(t, ns, "webDav")
	refused(t, ns, "  KOPIA_WEBDAV_USERNAME: backup\n  KOPIA_WEBDAV_PASSWORD: wrong", fmt.Sprintf(backend, "bad-creds"), kopia.ClassAccessDenied, "401")
}

// An SSH server with the SFTP subsystem holds a repository, reached with
// a private key and a known_hosts entry; a server whose key is not the
// known one is refused, never trusted on first use.
func TestBackupToSFTP(t *testing.T) {
	const ns = "backend-sftp"
	authorized, key, err := backendsrv.ClientKey()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := backendsrv.StartSFTP("backup", "ssh-secret", authorized)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	impostor, err := backendsrv.StartSFTP("backup", "ssh-secret", authorized)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(impostor.Close)
	backend := func(port int, secret string) string {
		return fmt.Sprintf("{sftp: {host: %s, port: %d, path: /backups/team-a, username: backup, auth: {secretRef: {name: %s}}}}", srv.Host, port, secret)
	}
	secret := fmt.Sprintf("  KOPIA_SFTP_KEY_DATA: %q\n  KOPIA_SFTP_KNOWN_HOSTS_DATA: %q", key, srv.KnownHosts)
	backendNamespace(t, ns, secret, backend(srv.Port, "creds"))
	backUpAndRestore(t, ns, "sftp")
	// The impostor answers with its own host key, which known_hosts does
	// not list for its address.
	refused(t, ns, secret, backend(impostor.Port, "bad-creds"), kopia.ClassHostKeyRejected, "knownhosts")
}

// A Google Cloud Storage bucket (fake-gcs-server, which the movers reach
// through STORAGE_EMULATOR_HOST, as the Google client allows) holds a
// repository, reached with a service account key from the auth Secret; a
// bucket that does not exist is named as such.
func TestBackupToGCS(t *testing.T) {
	harness.RequireTool(t, "fake-gcs-server")
	const ns = "backend-gcs"
	g, err := harness.StartGCS("team-backups")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	env.Functions.Node.SetRuntimeEnv("STORAGE_EMULATOR_HOST", g.Host)
	t.Cleanup(func() { env.Functions.Node.SetRuntimeEnv("STORAGE_EMULATOR_HOST", "") })
	const key = `{"type":"service_account","project_id":"team","private_key":"unused by the emulator","client_email":"mover@team.iam.gserviceaccount.com","token_uri":"https://oauth2.googleapis.com/token"}`
	secret := fmt.Sprintf("  KOPIA_GCS_CREDENTIALS_JSON: %q", key)
	backend := func(bucket, secret string) string {
		return fmt.Sprintf("{gcs: {bucket: %s, prefix: snapflow/team-a/, auth: {secretRef: {name: %s}}}}", bucket, secret)
	}
	backendNamespace(t, ns, secret, backend("team-backups", "creds"))
	backUpAndRestore(t, ns, "gcs")
	refused(t, ns, secret, backend("no-such-bucket", "bad-creds"), kopia.ClassBucketMissing, "no-such-bucket")
}
