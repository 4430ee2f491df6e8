package prune

import (
	"strings"
	"testing"
)

// deletedKeys is every raw key the final snapshot would delete.
func deletedKeys(t *testing.T, f *fixture) []string {
	t.Helper()
	pl := f.plan(t)
	fin, err := FinalSnapshot(pl, f.inv(), f.listing(), now)
	if err != nil {
		t.Fatalf("final snapshot: %v\n%s", err, dump(pl))
	}
	var out []string
	for _, c := range fin.Candidates {
		if c.State == StateOrphan {
			for _, o := range c.Objects {
				out = append(out, o.Key)
			}
		}
	}
	return out
}

// Keys are filed by S3 under their raw bytes; a key whose cleaned form
// lands under an orphan but whose raw form does not must never be deleted
// with it: every listing result is filtered by its raw key.
func TestRawKeysNotInNormalFormNeverJoinACandidate(t *testing.T) {
	f := newFixture()
	f.put(O+"/app/x", 10, old) // an unowned root: orphan-volume-root
	odd := []string{"unrelated/../" + O + "/a", "/" + O + "/b", " " + O + "/c", U + "/../" + O + "/d"}
	for _, k := range odd {
		f.put(k, 10, old)
	}
	// Inside a live backup's prefix, a key that cleans into an orphan sibling.
	f.backup("b1", func(b *Backup) { b.Path = "/app/" + C + "/pg/b1" })
	f.manifest(R, R+"/app/"+C+"/pg/b1", "Delete", old, nil)
	f.put(R+"/app/"+C+"/pg/b1/data", 10, old)
	f.manifest(R, R+"/app/"+C+"/pg/b2", "Delete", old, nil)
	f.put(R+"/app/"+C+"/pg/b2/data", 10, old)
	f.put(R+"/app/"+C+"/pg/b1/../b2/x", 10, old)

	del := deletedKeys(t, f)
	joined := strings.Join(del, "\n")
	for _, k := range append(odd, R+"/app/"+C+"/pg/b1/../b2/x") {
		if strings.Contains("\n"+joined+"\n", "\n"+k+"\n") {
			t.Errorf("%q (not in normal form) would be deleted:\n%s", k, joined)
		}
	}
	if !strings.Contains(joined, O+"/app/x") || !strings.Contains(joined, R+"/app/"+C+"/pg/b2/data") {
		t.Errorf("the real orphans must still be deleted:\n%s", joined)
	}
}

// A non-empty object named "<backup>/" is ordinary data, not a directory
// marker: a stray at plan time, it must not join the backup at execution.
func TestSlashNamedObjectStaysAStrayAtExecution(t *testing.T) {
	f := newFixture()
	dir := R + "/app/" + C + "/pg/b1"
	f.manifest(R, dir, "Delete", old, nil)
	f.put(dir+"/data", 10, old)
	f.put(dir+"/", 42, old)
	for _, k := range deletedKeys(t, f) {
		if k == dir+"/" {
			t.Fatalf("the non-empty %q object was deleted with its backup without --delete-repository-stray", k)
		}
	}
}

// A user PV on the repository StorageClass protects its handle even when
// its claim is gone and the handle is not a canonical root.
func TestReleasedUserPVOnTheRepositoryClassProtectsItsHandle(t *testing.T) {
	f := newFixture()
	f.in.PVs = append(f.in.PVs, PV{Name: "pv-user", StorageClassName: "sc-repo", Phase: "Released", ClaimNamespace: "app", ClaimName: "user-data",
		CSIDriver: CSIDriverS3, VolumeHandle: bkt + "/" + R + "/app/" + C})
	dir := R + "/app/" + C + "/pg/b1"
	f.manifest(R, dir, "Delete", old, nil)
	f.put(dir+"/data", 10, old)
	pl := f.plan(t)
	for _, c := range pl.Candidates {
		if c.State == StateOrphan && Overlaps(c.Prefix, dir) {
			t.Fatalf("data under a user PV's handle is orphan:\n%s", dump(pl))
		}
	}
	if len(pl.Candidates) == 0 {
		t.Fatal("no candidates at all: the test layout is wrong")
	}

	// A handle that cannot be mapped blocks execution instead.
	g := newFixture()
	g.in.PVs = append(g.in.PVs, PV{Name: "pv-odd", StorageClassName: "sc-repo", Phase: "Released", CSIDriver: CSIDriverS3, VolumeHandle: "gs://elsewhere/x"})
	if pl := g.plan(t); !pl.Blocked() {
		t.Fatalf("an unmappable user PV handle must block:\n%s", dump(pl))
	}
}

// An unreadable manifest keeps its own backup (invalid-manifest) and names
// nothing: its cluster's other backups are judged on their own (spec
// 3.8.2 rule 1, 3.8.4), so one truncated file never freezes the cluster.
func TestUnreadableManifestKeepsOnlyItsOwnBackup(t *testing.T) {
	f := newFixture()
	cluster := R + "/app/" + C
	f.rawManifest(cluster+"/pg/broken/"+DefaultManifestName, []byte("{"), old)
	f.put(cluster+"/pg/broken/data", 10, old)
	f.manifest(R, cluster+"/pg/full", "Delete", old, nil)
	f.put(cluster+"/pg/full/data", 10, old)
	f.manifest(R, R+"/app/"+C2+"/pg/other", "Delete", old, nil)
	f.put(R+"/app/"+C2+"/pg/other/data", 10, old)
	pl := f.plan(t)
	wantState(t, mustFind(t, pl, TypeBackup, cluster+"/pg/broken"), StateInvalidManifest, "invalid manifest")
	wantState(t, mustFind(t, pl, TypeBackup, cluster+"/pg/full"), StateOrphan, "")
	wantState(t, mustFind(t, pl, TypeBackup, R+"/app/"+C2+"/pg/other"), StateOrphan, "")
}
