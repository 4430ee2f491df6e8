package prune

import (
	"errors"
	"strings"
	"testing"
)

// orphanPlan builds one orphan backup (b1) plus an orphan volume root and
// returns a final snapshot ready for execution.
func orphanPlan(t *testing.T) (*fixture, Plan) {
	t.Helper()
	f := newFixture()
	b1 := R + "/app/" + C + "/pg/b1"
	f.manifest(R, b1, "Delete", old, nil)
	f.put(b1+"/data", 100, old)
	f.put(O+"/x", 5, old)
	pl := f.plan(t)
	fin, err := FinalSnapshot(pl, f.inv(), f.listing(), now)
	if err != nil {
		t.Fatal(err)
	}
	if err := GlobalGuards(fin); err != nil {
		t.Fatal(err)
	}
	return f, fin
}

func reasons(inv []Invalidation) string {
	var s []string
	for _, i := range inv {
		s = append(s, i.Prefix+": "+i.Reason)
	}
	return strings.Join(s, "\n")
}

// Execution re-checks the planner can decide: blockers, global guards,
// revalidation against a refreshed inventory and a fresh listing, and the
// final snapshot.
func TestExecutionRechecks_5(t *testing.T) {
	b1 := R + "/app/" + C + "/pg/b1"
	t.Run("case53/4.1 blockers stop the final snapshot", func(t *testing.T) {
		f := newFixture()
		f.in.PVCs[0].VolumeName = ""
		f.put(O+"/x", 1, old)
		pl := f.plan(t)
		if _, err := FinalSnapshot(pl, f.inv(), f.listing(), now); !errors.Is(err, ErrExecutionBlocked) {
			t.Fatalf("err %v", err)
		}
		if !errors.Is(GlobalGuards(pl), ErrExecutionBlocked) {
			t.Fatal("guards must refuse a blocked plan")
		}
	})
	t.Run("case54/5.6,6.3 versioned bucket without purge-versions", func(t *testing.T) {
		f := newFixture()
		f.put(O+"/x", 1, old)
		f.opts.Versioning, f.opts.VersioningSource = VersioningEnabled, SourceDetected
		pl := f.plan(t)
		if err := GlobalGuards(pl); err == nil || !strings.Contains(err.Error(), "--purge-versions") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("case57/5.7,5.10 new Backup with the same key", func(t *testing.T) {
		f, fin := orphanPlan(t)
		f.backup("b1", nil)
		inv, err := Recheck(fin, f.inv(), f.listing())
		if err != nil || len(inv) != 1 || inv[0].Prefix != b1 || !strings.Contains(inv[0].Reason, "exists") {
			t.Fatalf("%v %s", err, reasons(inv))
		}
	})
	t.Run("5.10 new live dependency", func(t *testing.T) {
		f, fin := orphanPlan(t)
		f.backup("n", func(b *Backup) { b.ParentBackupName = "b1"; b.Path = "/app/" + C + "/pg/n" })
		inv, _ := Recheck(fin, f.inv(), f.listing())
		if len(inv) != 1 || !strings.Contains(inv[0].Reason, "parent or base") {
			t.Fatal(reasons(inv))
		}
	})
	t.Run("5.12 new Restore and storage protection", func(t *testing.T) {
		f, fin := orphanPlan(t)
		f.in.Restores = []Restore{{Namespace: "app", Name: "r", BackupNamespace: "app", BackupName: "b1"}}
		addStoragePVC(f, bkt+"/"+O+"/x")
		inv, _ := Recheck(fin, f.inv(), f.listing())
		if len(inv) != 2 || !strings.Contains(reasons(inv), "Restore") || !strings.Contains(reasons(inv), "storage") {
			t.Fatal(reasons(inv))
		}
	})
	t.Run("case59/5.11,6.4 object added", func(t *testing.T) {
		f, fin := orphanPlan(t)
		f.put(b1+"/late", 1, old)
		inv, _ := Recheck(fin, f.inv(), f.listing())
		if len(inv) != 1 || !strings.Contains(inv[0].Reason, "objects changed") {
			t.Fatal(reasons(inv))
		}
	})
	t.Run("case60/6.5 manifest overwritten", func(t *testing.T) {
		f, fin := orphanPlan(t)
		for i := range f.objs {
			if strings.HasSuffix(f.objs[i].Key, DefaultManifestName) {
				f.objs[i].ETag = "new"
			}
		}
		c := mustFind(t, fin, TypeBackup, b1)
		if err := CheckManifestHead(*c, Object{ETag: "new"}); err == nil || !strings.Contains(err.Error(), "manifest changed") {
			t.Fatalf("err %v", err)
		}
		inv, _ := Recheck(fin, f.inv(), f.listing())
		if len(inv) != 1 || !strings.Contains(inv[0].Reason, "changed") {
			t.Fatal(reasons(inv))
		}
	})
	t.Run("case63/5.9 refresh checks", func(t *testing.T) {
		for name, mut := range map[string]func(f *fixture){
			"uid":        func(f *fixture) { f.in.Repo.UID = "other" },
			"generation": func(f *fixture) { f.in.Repo.Generation = 2 },
			"bucket": func(f *fixture) {
				f.in.Repo.Config["bucket"] = "b2"
				f.in.StorageClass.Parameters["bucket"] = "b2"
				f.in.PVs[0].VolumeHandle = "b2/" + R
			},
			"mapping": func(f *fixture) {
				f.in.PVCs = append(f.in.PVCs, PVC{Namespace: "b", Name: "pvc-repo-x", UID: "77777777-7777-4777-8777-777777777777", VolumeName: "pv-b", StorageClassName: "sc-repo"})
				f.in.PVs = append(f.in.PVs, PV{Name: "pv-b", StorageClassName: "sc-repo", ClaimNamespace: "b", ClaimName: "pvc-repo-x", CSIDriver: CSIDriverS3, VolumeHandle: bkt + "/pvc-77777777-7777-4777-8777-777777777777", Phase: "Bound"})
			},
			"blockers": func(f *fixture) { f.in.RestoresErr = errTest },
		} {
			f, fin := orphanPlan(t)
			mut(f)
			if _, err := Recheck(fin, f.inv(), f.listing()); !errors.Is(err, ErrStalePlan) {
				t.Fatalf("%s: err %v", name, err)
			}
		}
	})
	t.Run("case64/5.10 new PVC owns the unowned root", func(t *testing.T) {
		f, fin := orphanPlan(t)
		f.in.PVCs = append(f.in.PVCs, PVC{Namespace: "app", Name: "new", UID: strings.TrimPrefix(O, "pvc-"), StorageClassName: "standard"})
		inv, err := Recheck(fin, f.inv(), f.listing())
		if err != nil || len(inv) != 1 || inv[0].Prefix != O || !strings.Contains(inv[0].Reason, "now owned by") {
			t.Fatalf("%v %s", err, reasons(inv))
		}
	})
	t.Run("case65/5.6 orphan stray without the flag", func(t *testing.T) {
		_, fin := orphanPlan(t)
		fin.Candidates = append(fin.Candidates, Candidate{Type: TypeRepositoryStray, State: StateOrphan, Prefix: R,
			Objects: []Object{{Key: R + "/x", ETag: "e"}}, ObjectCount: 1})
		if err := GlobalGuards(fin); err == nil || !strings.Contains(err.Error(), "delete-repository-stray") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("5.6 deferred and unknown types are rejected", func(t *testing.T) {
		f := newFixture().withH("Released")
		f.put(H+"/app/x", 1, old)
		pl := f.plan(t)
		if err := GlobalGuards(pl); err == nil || !strings.Contains(err.Error(), "never enumerated") {
			t.Fatalf("err %v", err)
		}
		_, fin := orphanPlan(t)
		fin.Candidates[0].Type, fin.Candidates[0].State = TypeProtectedUserVolume, StateOrphan
		if err := GlobalGuards(fin); err == nil {
			t.Fatal("protected-user-volume must be rejected")
		}
	})
	t.Run("5.5 final snapshot re-checks age and counts", func(t *testing.T) {
		f := newFixture()
		f.put(O+"/x", 5, old)
		pl := f.plan(t)
		f.put(O+"/y", 6, young)
		fin, err := FinalSnapshot(pl, f.inv(), f.listing(), now)
		if err != nil {
			t.Fatal(err)
		}
		c := mustFind(t, fin, TypeOrphanVolumeRoot, O)
		if c.State != StateTooYoung || fin.DeleteObjects != 0 || c.Objects != nil {
			t.Fatal(dump(fin))
		}
	})
	t.Run("case48/5.5 stray keeps planned keys and full scope", func(t *testing.T) {
		f := newFixture()
		cd := R + "/app/" + C
		f.put(cd+"/unexpected.bin", 3, old)
		f.put(cd+"/pg/b1/data", 1, old)
		f.opts.DeleteRepositoryStray = true
		pl := f.plan(t)
		f.put(cd+"/another.bin", 1, old) // not planned: never added to the stray
		fin, err := FinalSnapshot(pl, f.inv(), f.listing(), now)
		if err != nil {
			t.Fatal(err)
		}
		c := mustFind(t, fin, TypeRepositoryStray, cd)
		if c.State != StateOrphan || c.ObjectCount != 1 || len(c.FullScope) != 3 {
			t.Fatalf("%+v", c)
		}
		if err := GlobalGuards(fin); err != nil {
			t.Fatal(err)
		}
		if g := ExecutionGroups(fin); len(g[0]) != 1 || fin.Candidates[g[0][0]].Type != TypeRepositoryStray || len(g[1]) != 1 {
			t.Fatalf("groups %v", g)
		}
		if inv, _ := Recheck(fin, f.inv(), f.listing()); len(inv) != 0 {
			t.Fatal(reasons(inv))
		}
		f.put(cd+"/pg/b1/more", 1, old) // the cluster scope changed
		inv, _ := Recheck(fin, f.inv(), f.listing())
		if len(inv) != 2 || !strings.Contains(reasons(inv), cd+": cluster scope") {
			t.Fatal(reasons(inv))
		}
	})
	t.Run("5.10 orphan-cluster-root revalidation", func(t *testing.T) {
		f := newFixture()
		cd := R + "/app/" + C
		c := Candidate{Type: TypeOrphanClusterRoot, State: StateOrphan, Prefix: cd, Root: R}
		if err := Revalidate(Plan{}, c, f.inv()); err != nil {
			t.Fatal(err)
		}
		f.backup("y", func(b *Backup) { b.Labels = map[string]string{LabelClusterUID: uuidA} })
		if err := Revalidate(Plan{}, c, f.inv()); err == nil || !strings.Contains(err.Error(), "referenced") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("5.10 orphan-repository-root revalidation", func(t *testing.T) {
		f := newFixture().withH("Released")
		f.put(H+"/app/"+C+"/pg/b1/data", 1, old)
		pl := f.plan(t)
		fin, _ := FinalSnapshot(pl, f.inv(), f.listing(), now)
		if inv, err := Recheck(fin, f.inv(), f.listing()); err != nil || len(inv) != 0 {
			t.Fatalf("%v %s", err, reasons(inv))
		}
		f.backup("y", func(b *Backup) { b.Labels = map[string]string{LabelClusterUID: uuidA} })
		if inv, _ := Recheck(fin, f.inv(), f.listing()); len(inv) != 1 || !strings.Contains(inv[0].Reason, "referenced") {
			t.Fatal(reasons(inv))
		}
		f.in.PVs[len(f.in.PVs)-1].Phase = "Bound"
		f.in.Backups = nil
		if inv, _ := Recheck(fin, f.inv(), f.listing()); len(inv) != 1 || !strings.Contains(inv[0].Reason, "current again") {
			t.Fatal(reasons(inv))
		}
	})
	t.Run("3.8.4,5.5 final snapshot reruns the dependency fixed point", func(t *testing.T) {
		// A retained backup inside a historical root names a parent in R.
		f := newFixture().withH("Released")
		f.manifest(H, H+"/app/"+C+"/pg/b2", "Retain", old, func(m map[string]any) { sub(m, "status")["parentBackupName"] = "b1" })
		f.put(R+"/app/"+C+"/pg/b1/data", 1, old)
		pl := f.plan(t)
		wantState(t, mustFind(t, pl, TypeBackup, R+"/app/"+C+"/pg/b1"), StateOrphan, "")
		fin, _ := FinalSnapshot(pl, f.inv(), f.listing(), now)
		wantState(t, mustFind(t, fin, TypeOrphanRepositoryRoot, H), StateRetained, "")
		wantState(t, mustFind(t, fin, TypeBackup, R+"/app/"+C+"/pg/b1"), StateDependency, "")
	})
}

func TestSnapshotIdentity_6_4_6_5(t *testing.T) {
	a := Object{Key: "k", Size: 1, ETag: "e", LastModified: old, VersionID: "v"}
	tests := []struct {
		name string
		cur  []Object
		want string
	}{
		{"equal", []Object{a}, ""},
		{"size", []Object{{Key: "k", Size: 2, ETag: "e", LastModified: old, VersionID: "v"}}, "size"},
		{"etag", []Object{{Key: "k", Size: 1, ETag: "x", LastModified: old, VersionID: "v"}}, "etag"},
		{"time", []Object{{Key: "k", Size: 1, ETag: "e", LastModified: old.Add(1), VersionID: "v"}}, "last-modified"},
		{"version", []Object{{Key: "k", Size: 1, ETag: "e", LastModified: old, VersionID: "w"}}, "gone"},
		{"marker", []Object{{Key: "k", Size: 1, ETag: "e", LastModified: old, VersionID: "v", DeleteMarker: true}}, "delete-marker"},
		{"new", []Object{a, {Key: "k2"}}, "new"},
		{"duplicate", []Object{a, a}, "twice"},
	}
	for _, tt := range tests {
		t.Run("6.4/"+tt.name, func(t *testing.T) {
			err := CompareSnapshots([]Object{a}, tt.cur)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
	c := Candidate{ManifestKey: "m", ManifestETag: "e", ManifestLastModified: old.Add(123e6)}
	heads := []struct {
		name string
		c    Candidate
		head Object
		ok   bool
	}{
		{"plain, second precision", c, Object{ETag: "e", LastModified: old}, true},
		{"plain, other second", c, Object{ETag: "e", LastModified: old.Add(2e9)}, false},
		{"empty etag", c, Object{LastModified: old}, false},
		{"gcs generation reported as version", Candidate{ManifestKey: "m", ManifestETag: "e", ManifestGeneration: "7"}, Object{ETag: "e", VersionID: "7"}, true},
		{"version mismatch", Candidate{ManifestKey: "m", ManifestETag: "e", ManifestVersionID: "v1"}, Object{ETag: "e", VersionID: "v2"}, false},
	}
	for _, h := range heads {
		t.Run("6.5/"+h.name, func(t *testing.T) {
			if err := CheckManifestHead(h.c, h.head); (err == nil) != h.ok {
				t.Fatalf("err %v", err)
			}
		})
	}
}
