package prune

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The shared test fixture: R is the current repository root (Backup PVC
// app/pvc-repo-x, bound), U a user volume root (PVC app/data), O an unowned
// root and H a historical repository root (see withH); C and C2 are
// cluster directories of uuidA and uuidB.
const (
	R       = "pvc-11111111-1111-4111-8111-111111111111"
	U       = "pvc-22222222-2222-4222-8222-222222222222"
	O       = "pvc-33333333-3333-4333-8333-333333333333"
	H       = "pvc-44444444-4444-4444-8444-444444444444"
	uuidA   = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
	uuidB   = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
	C       = "db-" + uuidA
	C2      = "db2-" + uuidB
	repoUID = "12345678-9abc-4def-8000-000000000000"
	bkt     = "bkt"
)

var (
	now   = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	old   = now.Add(-30 * 24 * time.Hour)
	young = now.Add(-time.Hour)
)

type fixture struct {
	in        InventoryInput
	objs      []Object
	manifests map[string]ManifestBody
	opts      Options
	versioned bool
	etag      int
}

func newFixture() *fixture {
	f := &fixture{manifests: map[string]ManifestBody{}}
	f.in.Repo = BackupRepo{Name: "repo", UID: repoUID, Generation: 1, Config: map[string]string{"bucket": bkt},
		GeneratedStorageClassName: "sc-repo", BackupPVCName: "pvc-repo-x"}
	f.in.StorageClass = &StorageClass{Name: "sc-repo", Provisioner: CSIDriverS3, Parameters: map[string]string{"bucket": bkt}}
	f.in.PVCs = []PVC{
		{Namespace: "app", Name: "pvc-repo-x", UID: strings.TrimPrefix(R, "pvc-"), StorageClassName: "sc-repo", VolumeName: R, Phase: "Bound",
			Labels: map[string]string{LabelBackupRepoName: "repo"}},
		{Namespace: "app", Name: "data", UID: strings.TrimPrefix(U, "pvc-"), StorageClassName: "standard", VolumeName: U, Phase: "Bound"},
	}
	f.in.PVs = []PV{
		{Name: R, StorageClassName: "sc-repo", Phase: "Bound", ClaimNamespace: "app", ClaimName: "pvc-repo-x", CSIDriver: CSIDriverS3, VolumeHandle: bkt + "/" + R},
		{Name: U, StorageClassName: "standard", Phase: "Bound", ClaimNamespace: "app", ClaimName: "data", CSIDriver: "ebs.csi.aws.com", VolumeHandle: "vol-123"},
	}
	f.opts = Options{Versioning: VersioningDisabled, VersioningSource: SourceOperatorOverride}
	return f
}

// withH adds the Released repository PV of the historical root H.
func (f *fixture) withH(phase string) *fixture {
	f.in.PVs = append(f.in.PVs, PV{Name: H, StorageClassName: "sc-repo", Phase: phase, ClaimNamespace: "app",
		ClaimName: "pvc-repo-x", CSIDriver: CSIDriverS3, VolumeHandle: bkt + "/" + H})
	return f
}

func (f *fixture) put(key string, size int64, t time.Time) *Object {
	f.etag++
	f.objs = append(f.objs, Object{Key: key, Size: size, ETag: fmt.Sprintf("e%d", f.etag), LastModified: t})
	return &f.objs[len(f.objs)-1]
}

func (f *fixture) has(key string) bool {
	for _, o := range f.objs {
		if o.Key == key {
			return true
		}
	}
	return false
}

// manifestDoc is the backup manifest document for dir and policy, as a
// mutable document: a valid Backup of repo in namespace app, named after
// dir, with status.path pointing at dir.
func manifestDoc(root, dir, policy string) map[string]any {
	return map[string]any{
		"apiVersion": ManifestAPIVersion, "kind": "Backup",
		"metadata": map[string]any{"name": dir[strings.LastIndex(dir, "/")+1:], "namespace": "app",
			"uid": "uid-" + dir[strings.LastIndex(dir, "/")+1:], "creationTimestamp": old.Format(time.RFC3339)},
		"spec":   map[string]any{"deletionPolicy": policy},
		"status": map[string]any{"path": "/" + strings.TrimPrefix(dir, root+"/"), "backupRepoName": "repo"},
	}
}

func sub(doc map[string]any, k string) map[string]any { return doc[k].(map[string]any) }

// manifest writes the manifest document for dir and policy (manifestDoc),
// letting mut adjust it first.
func (f *fixture) manifest(root, dir, policy string, t time.Time, mut func(map[string]any)) *Object {
	doc := manifestDoc(root, dir, policy)
	if mut != nil {
		mut(doc)
	}
	b, _ := json.Marshal(doc)
	return f.rawManifest(dir+"/"+DefaultManifestName, b, t)
}

func (f *fixture) rawManifest(key string, body []byte, t time.Time) *Object {
	o := f.put(key, int64(len(body)), t)
	f.manifests[key] = ManifestBody{Data: body}
	return o
}

func (f *fixture) backup(name string, mut func(*Backup)) {
	b := Backup{Namespace: "app", Name: name, UID: "uid-" + name, BackupRepoName: "repo"}
	if mut != nil {
		mut(&b)
	}
	f.in.Backups = append(f.in.Backups, b)
}

func (f *fixture) inv() Inventory { return BuildInventory(f.in) }

func (f *fixture) listing() Listing {
	return Listing{Objects: append([]Object(nil), f.objs...), Versioned: f.versioned, Manifests: f.manifests}
}

func (f *fixture) plan(t *testing.T) Plan {
	t.Helper()
	pl, err := NewPlan(f.inv(), f.listing(), f.opts, now)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	return pl
}

func find(pl Plan, typ CandidateType, prefix string) *Candidate {
	for i, c := range pl.Candidates {
		if c.Type == typ && c.Prefix == prefix {
			return &pl.Candidates[i]
		}
	}
	return nil
}

func mustFind(t *testing.T, pl Plan, typ CandidateType, prefix string) *Candidate {
	t.Helper()
	c := find(pl, typ, prefix)
	if c == nil {
		t.Fatalf("no %s candidate %s; have:\n%s", typ, prefix, dump(pl))
	}
	return c
}

func dump(pl Plan) string {
	var b strings.Builder
	for _, c := range pl.Candidates {
		fmt.Fprintf(&b, "  %s %s %s n=%d deferred=%v conf=%v: %s\n", c.State, c.Type, c.Prefix, c.ObjectCount, c.DeferredScan, c.DeletionConfigurable, c.Reason)
	}
	fmt.Fprintf(&b, "  blockers: %v\n", pl.BlockingReasons)
	return b.String()
}

func wantState(t *testing.T, c *Candidate, st State, reasonPart string) {
	t.Helper()
	if c.State != st || !strings.Contains(c.Reason, reasonPart) {
		t.Fatalf("%s %s: state %s (%q), want %s containing %q", c.Type, c.Prefix, c.State, c.Reason, st, reasonPart)
	}
}

func listedBelow(pl Plan, prefix string, recursiveOnly bool) []ListCall {
	var out []ListCall
	for _, l := range pl.Listed {
		if Contains(prefix, l.Prefix) && (!recursiveOnly || l.Recursive) {
			out = append(out, l)
		}
	}
	return out
}

var zeroTime time.Time
