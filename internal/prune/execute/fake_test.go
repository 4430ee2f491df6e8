package execute

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/snapflow/snapflow/internal/prune"
)

// The shared test fixture (see newCluster): R is the current repository
// root, U a user volume root, O an unowned root and H a historical
// repository root; C and C2 are cluster directories of uuidA and uuidB.
const (
	R     = "pvc-11111111-1111-4111-8111-111111111111"
	U     = "pvc-22222222-2222-4222-8222-222222222222"
	O     = "pvc-33333333-3333-4333-8333-333333333333"
	H     = "pvc-44444444-4444-4444-8444-444444444444"
	uuidA = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
	uuidB = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
	C     = "db-" + uuidA
	C2    = "db2-" + uuidB
	bkt   = "bkt"
)

var (
	now = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	old = now.Add(-30 * 24 * time.Hour)
)

// memStore is an in-memory bucket with S3 listing semantics.
type memStore struct {
	mu         sync.Mutex
	objs       []prune.Object
	bodies     map[string][]byte
	versioned  bool
	versioning string
	seq        int
	calls      []string
	// onList runs before a listing is answered (outside the lock).
	onList func(call string)
	// onDelete may answer a batch itself.
	onDelete func(batch []prune.DeleteTarget) ([]prune.DeleteTarget, []prune.DeleteFailure, error, bool)
	deleted  [][]prune.DeleteTarget
}

func newStore() *memStore { return &memStore{bodies: map[string][]byte{}} }

func (m *memStore) put(key string, size int64, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	o := prune.Object{Key: key, Size: size, ETag: fmt.Sprintf("e%d", m.seq), LastModified: t}
	if m.versioned {
		o.VersionID, o.IsLatest = fmt.Sprintf("v%d", m.seq), true
		for i := range m.objs {
			if m.objs[i].Key == key {
				m.objs[i].IsLatest = false
			}
		}
	} else {
		m.objs = removeKey(m.objs, key)
	}
	m.objs = append(m.objs, o)
}

func removeKey(os []prune.Object, key string) []prune.Object {
	out := os[:0]
	for _, o := range os {
		if o.Key != key {
			out = append(out, o)
		}
	}
	return out
}

// manifest writes a valid backup manifest for dir and policy: a Backup of
// repo in namespace app, named after dir, with status.path pointing at dir.
func (m *memStore) manifest(root, dir, policy string, t time.Time) {
	name := dir[strings.LastIndex(dir, "/")+1:]
	doc := map[string]any{
		"apiVersion": prune.ManifestAPIVersion, "kind": "Backup",
		"metadata": map[string]any{"name": name, "namespace": "app", "uid": "uid-" + name, "creationTimestamp": old.Format(time.RFC3339)},
		"spec":     map[string]any{"deletionPolicy": policy},
		"status":   map[string]any{"path": "/" + strings.TrimPrefix(dir, root+"/"), "backupRepoName": "repo"},
	}
	b, _ := json.Marshal(doc)
	key := dir + "/" + prune.DefaultManifestName
	m.put(key, int64(len(b)), t)
	m.mu.Lock()
	m.bodies[key] = b
	m.mu.Unlock()
}

func (m *memStore) record(call string) {
	if m.onList != nil {
		m.onList(call)
	}
	m.mu.Lock()
	m.calls = append(m.calls, call)
	m.mu.Unlock()
}

func (m *memStore) view(p string, versions bool) []prune.Object {
	m.mu.Lock()
	defer m.mu.Unlock()
	lp := listPrefixOf(p)
	var out []prune.Object
	for _, o := range m.objs {
		if !strings.HasPrefix(o.Key, lp) {
			continue
		}
		if !versions {
			if m.versioned && (!o.IsLatest || o.DeleteMarker) {
				continue
			}
			o.VersionID, o.IsLatest = "", false
		}
		out = append(out, o)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func listPrefixOf(p string) string {
	if p == "" {
		return ""
	}
	return p + "/"
}

func (m *memStore) ListLevel(_ context.Context, p string, versions bool) ([]prune.Object, []string, error) {
	m.record("level:" + p)
	lp := listPrefixOf(p)
	var objs []prune.Object
	seen := map[string]bool{}
	var dirs []string
	for _, o := range m.view(p, versions) {
		rest := o.Key[len(lp):]
		if i := strings.Index(rest, "/"); i >= 0 {
			if d := rest[:i]; !seen[d] {
				seen[d] = true
				dirs = append(dirs, d)
			}
			continue
		}
		objs = append(objs, o)
	}
	return objs, dirs, nil
}

func (m *memStore) ListAll(_ context.Context, p string, versions bool) ([]prune.Object, error) {
	m.record("all:" + p)
	return m.view(p, versions), nil
}

func (m *memStore) WalkAll(ctx context.Context, p string, versions bool, fn func([]prune.Object) error) error {
	objs, err := m.ListAll(ctx, p, versions)
	if err != nil {
		return err
	}
	// Small pages exercise the planner's paging.
	for len(objs) > 0 {
		n := min(3, len(objs))
		if err := fn(objs[:n:n]); err != nil {
			return err
		}
		objs = objs[n:]
	}
	return nil
}

func (m *memStore) ReadManifest(_ context.Context, key, _ string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, "get:"+key)
	b, ok := m.bodies[key]
	if !ok {
		return nil, fmt.Errorf("no such key %s", key)
	}
	return b, nil
}

func (m *memStore) HeadManifest(_ context.Context, key string) (prune.Object, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, "head:"+key)
	for _, o := range m.objs {
		if o.Key == key && (!m.versioned || o.IsLatest) && !o.DeleteMarker {
			if !m.versioned {
				o.VersionID = ""
			}
			return o, nil
		}
	}
	return prune.Object{}, fmt.Errorf("no such key %s", key)
}

func (m *memStore) BucketVersioning(context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, "versioning")
	return m.versioning, nil
}

func (m *memStore) GCS() bool { return false }

func (m *memStore) DeleteObjects(_ context.Context, batch []prune.DeleteTarget) ([]prune.DeleteTarget, []prune.DeleteFailure, error) {
	if m.onDelete != nil {
		if d, f, err, ok := m.onDelete(batch); ok {
			m.mu.Lock()
			m.deleted = append(m.deleted, batch)
			m.mu.Unlock()
			return d, f, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, fmt.Sprintf("delete:%d", len(batch)))
	m.deleted = append(m.deleted, batch)
	for _, t := range batch {
		out := m.objs[:0]
		for _, o := range m.objs {
			if o.Key == t.Key && (t.VersionID == "" || o.VersionID == t.VersionID) {
				continue
			}
			out = append(out, o)
		}
		m.objs = out
	}
	return batch, nil, nil
}

func (m *memStore) keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, o := range m.objs {
		out = append(out, o.Key)
	}
	sort.Strings(out)
	return out
}

func (m *memStore) callsWith(prefix string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, c := range m.calls {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// cluster is a mutable Kubernetes side with a refresh counter.
type cluster struct {
	mu        sync.Mutex
	in        prune.InventoryInput
	refreshes int
	// onRefresh runs before a refresh is answered.
	onRefresh func(n int, in *prune.InventoryInput)
}

func newCluster() *cluster {
	c := &cluster{}
	c.in.Repo = prune.BackupRepo{Name: "repo", UID: "12345678-9abc-4def-8000-000000000000", Generation: 1,
		Config: map[string]string{"bucket": bkt}, GeneratedStorageClassName: "sc-repo", BackupPVCName: "pvc-repo-x"}
	c.in.StorageClass = &prune.StorageClass{Name: "sc-repo", Provisioner: prune.CSIDriverS3, Parameters: map[string]string{"bucket": bkt}}
	c.in.PVCs = []prune.PVC{
		{Namespace: "app", Name: "pvc-repo-x", UID: strings.TrimPrefix(R, "pvc-"), StorageClassName: "sc-repo", VolumeName: R, Phase: "Bound",
			Labels: map[string]string{prune.LabelBackupRepoName: "repo"}},
		{Namespace: "app", Name: "data", UID: strings.TrimPrefix(U, "pvc-"), StorageClassName: "standard", VolumeName: U, Phase: "Bound"},
	}
	c.in.PVs = []prune.PV{
		{Name: R, StorageClassName: "sc-repo", Phase: "Bound", ClaimNamespace: "app", ClaimName: "pvc-repo-x", CSIDriver: prune.CSIDriverS3, VolumeHandle: bkt + "/" + R},
		{Name: U, StorageClassName: "standard", Phase: "Bound", ClaimNamespace: "app", ClaimName: "data", CSIDriver: "ebs.csi.aws.com", VolumeHandle: "vol-1"},
		{Name: H, StorageClassName: "sc-repo", Phase: "Released", ClaimNamespace: "app", ClaimName: "pvc-repo-x", CSIDriver: prune.CSIDriverS3, VolumeHandle: bkt + "/" + H},
	}
	return c
}

func (c *cluster) inventory() prune.Inventory {
	c.mu.Lock()
	defer c.mu.Unlock()
	return prune.BuildInventory(c.in)
}

func (c *cluster) Inventory(context.Context) (prune.Inventory, error) {
	c.mu.Lock()
	c.refreshes++
	n, hook := c.refreshes, c.onRefresh
	c.mu.Unlock()
	if hook != nil {
		c.mu.Lock()
		hook(n, &c.in)
		c.mu.Unlock()
	}
	return c.inventory(), nil
}

// addBackup adds a live Backup located in another cluster directory (UUID
// uuidB, cluster C2), so that it references only its own key.
func (c *cluster) addBackup(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.in.Backups = append(c.in.Backups, prune.Backup{Namespace: "app", Name: name, UID: "uid-" + name, BackupRepoName: "repo",
		Labels: map[string]string{prune.LabelClusterUID: uuidB}, Path: "/app/" + C2 + "/pg/" + name})
}
