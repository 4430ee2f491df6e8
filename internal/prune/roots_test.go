package prune

import (
	"strings"
	"testing"
)

// Root discovery and orphan volume roots: the root counts, an unowned root
// as one candidate, and what age, --namespace, --prefix, version-only
// objects and markers do to it.
func TestRootDiscoveryAndOrphanVolumeRoots(t *testing.T) {
	tests := []struct {
		name  string
		setup func(f *fixture)
		check func(t *testing.T, pl Plan)
	}{
		{"case01/2.5,3.3.2,3.3.4,10.6 root counts", func(f *fixture) {
			for _, r := range []string{R, U, O, "unrelated", strings.ToUpper(strings.Replace(R, "1", "9", 1))} {
				f.put(r+"/x", 1, old)
			}
		}, func(t *testing.T, pl Plan) {
			want := RootCounts{Total: 3, Repository: 1, ProtectedUser: 1, Unowned: 1}
			if pl.VolumeRootCounts != want {
				t.Fatalf("counts %+v, want %+v", pl.VolumeRootCounts, want)
			}
			if n := listedBelow(pl, U, false); len(n) > 0 {
				t.Fatalf("listed below the user root: %v", n)
			}
			for _, l := range pl.Listed {
				if strings.HasPrefix(l.Prefix, "unrelated") || strings.HasPrefix(l.Prefix, "PVC-") {
					t.Fatalf("listed %v", l)
				}
			}
			c := mustFind(t, pl, TypeProtectedUserVolume, U)
			if c.State != StateProtected || c.Visible() {
				t.Fatalf("user volume %+v", c)
			}
		}},
		{"case02/3.9.3 orphan volume root", func(f *fixture) { f.put(O+"/ns/c/data", 5, old) },
			func(t *testing.T, pl Plan) {
				c := mustFind(t, pl, TypeOrphanVolumeRoot, O)
				wantState(t, c, StateOrphan, "")
				if c.ObjectCount != 1 || len(pl.OrphanVolumeRoots) != 1 || pl.OrphanVolumeRoots[0] != O {
					t.Fatalf("count %d roots %v", c.ObjectCount, pl.OrphanVolumeRoots)
				}
			}},
		{"case03/3.9.3,10.8 young orphan volume root", func(f *fixture) { f.put(O+"/ns/c/data", 5, young) },
			func(t *testing.T, pl Plan) {
				c := mustFind(t, pl, TypeOrphanVolumeRoot, O)
				wantState(t, c, StateTooYoung, "younger")
				if !c.Visible() {
					t.Fatal("too-young must be shown")
				}
			}},
		{"case04/3.9.1 namespace never authorises an unowned root", func(f *fixture) {
			f.put(O+"/ns/c/data", 5, old)
			f.opts.Namespace = "app"
		}, func(t *testing.T, pl Plan) {
			c := mustFind(t, pl, TypeOrphanVolumeRoot, O)
			wantState(t, c, StateProtected, "--namespace")
			if !c.DeletionConfigurable || !c.Visible() || len(listedBelow(pl, O, false)) > 0 {
				t.Fatalf("configurable=%v listed=%v", c.DeletionConfigurable, listedBelow(pl, O, false))
			}
		}},
		{"case05/3.9.2,3.11 prefix inside the unowned root", func(f *fixture) {
			f.put(O+"/ns/c/data", 5, old)
			f.opts.Prefix = O + "/ns"
		}, func(t *testing.T, pl Plan) {
			c := mustFind(t, pl, TypeOrphanVolumeRoot, O)
			wantState(t, c, StateProtected, "only part")
			if !c.DeletionConfigurable {
				t.Fatal("want configurable")
			}
		}},
		{"case06/3.3.2,6.2 version-only root with purge-versions", func(f *fixture) {
			f.versioned = true
			f.objs = append(f.objs,
				Object{Key: O + "/x", Size: 7, ETag: "v1", VersionID: "v1", LastModified: old},
				Object{Key: O + "/x", VersionID: "dm", IsLatest: true, DeleteMarker: true, LastModified: old})
			f.opts.PurgeVersions, f.opts.Versioning, f.opts.VersioningSource = true, VersioningEnabled, SourceDetected
		}, func(t *testing.T, pl Plan) {
			c := mustFind(t, pl, TypeOrphanVolumeRoot, O)
			wantState(t, c, StateOrphan, "")
			if c.ObjectCount != 2 || c.Bytes != 7 {
				t.Fatalf("count %d bytes %d", c.ObjectCount, c.Bytes)
			}
		}},
		{"case06b/3.3.2 version-only root is invisible without purge-versions", func(f *fixture) {
			f.versioned = true
			f.objs = append(f.objs,
				Object{Key: O + "/x", Size: 7, VersionID: "v1", LastModified: old},
				Object{Key: O + "/x", VersionID: "dm", IsLatest: true, DeleteMarker: true, LastModified: old})
			f.opts.Versioning = VersioningEnabled
		}, func(t *testing.T, pl Plan) {
			if c := find(pl, TypeOrphanVolumeRoot, O); c != nil {
				t.Fatalf("unexpected %+v", c)
			}
		}},
		{"case07/3.9.3,2.8 root with only a marker", func(f *fixture) { f.put(O+"/", 0, old) },
			func(t *testing.T, pl Plan) {
				c := mustFind(t, pl, TypeOrphanVolumeRoot, O)
				if c.State != StateProtected || c.Visible() {
					t.Fatalf("%+v", c)
				}
			}},
		{"3.4.1 ownership unknown when PVCs cannot be listed", func(f *fixture) {
			f.put(O+"/x", 1, old)
			f.in.PVCsErr = errTest
		}, func(t *testing.T, pl Plan) {
			c := mustFind(t, pl, TypeProtectedUserVolume, O)
			wantState(t, c, StateProtected, "unknown owner")
			if !pl.Blocked() {
				t.Fatal("want blocker")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			tt.setup(f)
			tt.check(t, f.plan(t))
		})
	}
}

type testErr string

func (e testErr) Error() string { return string(e) }

const errTest = testErr("boom")

// A --prefix that overlaps no discovered pvc root is an error.
func TestPrefixMustOverlapARoot_3_3_5(t *testing.T) {
	f := newFixture()
	f.put(R+"/app/x", 1, old)
	f.opts.Prefix = "other/root"
	if _, err := NewPlan(f.inv(), f.listing(), f.opts, now); err == nil || !strings.Contains(err.Error(), "does not overlap") {
		t.Fatalf("err %v", err)
	}
}

// Historical repository roots: what keeps a root referenced (locators,
// cluster uid, paths, Restores, live dependencies, storage protection) and
// when it collapses into one deferred orphan candidate.
func TestHistoricalRoots_3_5(t *testing.T) {
	base := func(f *fixture) {
		f.withH("Released")
		f.put(H+"/app/"+C+"/pg/b1/data", 10, old)
	}
	noRoot := func(t *testing.T, pl Plan) {
		if c := find(pl, TypeOrphanRepositoryRoot, H); c != nil {
			t.Fatalf("unexpected root candidate: %s", dump(pl))
		}
	}
	tests := []struct {
		name  string
		setup func(f *fixture)
		check func(t *testing.T, pl Plan)
	}{
		{"case08/3.5.1,3.5.3 unreferenced root collapses", func(f *fixture) {}, func(t *testing.T, pl Plan) {
			c := mustFind(t, pl, TypeOrphanRepositoryRoot, H)
			wantState(t, c, StateOrphan, "")
			if !c.DeferredScan || c.ObjectCount != 0 || len(pl.Candidates) != 1 {
				t.Fatalf("deferred=%v n=%d\n%s", c.DeferredScan, c.ObjectCount, dump(pl))
			}
			for _, l := range listedBelow(pl, H, false) {
				if l.Recursive || l.Prefix != H && l.Prefix != H+"/app" {
					t.Fatalf("listed %v", l)
				}
			}
			if pl.VolumeRootCounts.Repository != 1 {
				t.Fatalf("counts %+v", pl.VolumeRootCounts)
			}
		}},
		{"case09/3.4.2,3.6 bound PV makes the root current", func(f *fixture) {
			f.in.PVs[len(f.in.PVs)-1].Phase = "Bound"
		}, func(t *testing.T, pl Plan) {
			noRoot(t, pl)
			wantState(t, mustFind(t, pl, TypeBackup, H+"/app/"+C+"/pg/b1"), StateOrphan, "")
		}},
		{"case10/3.5.2c Backup without a usable locator", func(f *fixture) { f.backup("x", nil) }, noRoot},
		{"case11/3.5.2c cluster-uid label", func(f *fixture) {
			f.backup("y", func(b *Backup) { b.Labels = map[string]string{LabelClusterUID: uuidA} })
		}, noRoot},
		{"case12/3.5.2c unrelated Backup lets the root collapse", func(f *fixture) {
			f.backup("z", func(b *Backup) { b.Labels = map[string]string{LabelClusterUID: uuidB}; b.Path = "/app/" + C2 + "/pg/z" })
		}, func(t *testing.T, pl Plan) { mustFind(t, pl, TypeOrphanRepositoryRoot, H) }},
		{"case13/2.9,3.5.2c relative raw path resolves under H", func(f *fixture) {
			f.backup("w", func(b *Backup) { b.Path = "app/" + C + "/pg/w" })
		}, noRoot},
		{"case14/2.10,3.5.2d active Restore with empty phase", func(f *fixture) {
			f.in.Restores = []Restore{{Namespace: "app", Name: "r", BackupNamespace: "app", BackupName: "gone"}}
		}, noRoot},
		{"case15/3.5.2e live dependency in the namespace", func(f *fixture) {
			f.backup("i", func(b *Backup) {
				b.Labels = map[string]string{LabelClusterUID: uuidB}
				b.ParentBackupName = "base"
			})
		}, noRoot},
		{"case16/2.11,3.5.2a,3.7.4 storage protection", func(f *fixture) {
			f.in.PVCs = append(f.in.PVCs, PVC{Namespace: "app", Name: "other", UID: "55555555-5555-4555-8555-555555555555",
				StorageClassName: "sc-repo", VolumeName: "pv-other", Phase: "Bound"})
			f.in.PVs = append(f.in.PVs, PV{Name: "pv-other", StorageClassName: "sc-repo", Phase: "Bound", ClaimNamespace: "app",
				ClaimName: "other", CSIDriver: CSIDriverS3, VolumeHandle: bkt + "/" + H + "/app/" + C})
		}, func(t *testing.T, pl Plan) {
			noRoot(t, pl)
			c := mustFind(t, pl, TypeOrphanClusterRoot, H+"/app/"+C)
			if c.State != StateProtected || c.Visible() || len(listedBelow(pl, H+"/app/"+C, false)) > 0 {
				t.Fatalf("%+v listed %v", c, listedBelow(pl, H+"/app/"+C, false))
			}
			if len(pl.Candidates) != 1 {
				t.Fatal(dump(pl))
			}
		}},
		{"case17/3.5.4 prefix inside the root", func(f *fixture) { f.opts.Prefix = H + "/app/" + C + "/pg" },
			func(t *testing.T, pl Plan) {
				c := mustFind(t, pl, TypeOrphanRepositoryRoot, H)
				wantState(t, c, StateProtected, "only part")
				if !c.DeletionConfigurable || !c.DeferredScan || len(pl.Candidates) != 1 {
					t.Fatal(dump(pl))
				}
			}},
		{"case18/3.5.3 no inner candidates even with strays", func(f *fixture) {
			f.put(H+"/loose", 1, old)
			f.put(H+"/Bad_NS/x", 1, old)
			f.opts.DeleteRepositoryStray = true
		}, func(t *testing.T, pl Plan) {
			mustFind(t, pl, TypeOrphanRepositoryRoot, H)
			if len(pl.Candidates) != 1 || pl.ScannedObjects != 1 {
				t.Fatalf("scanned %d\n%s", pl.ScannedObjects, dump(pl))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			base(f)
			tt.setup(f)
			tt.check(t, f.plan(t))
		})
	}
}

// The final snapshot of a historical root: at execution the deferred root
// is listed in full and takes the state of its backups.
func TestHistoricalRootFinalSnapshot_3_5_6(t *testing.T) {
	dir := H + "/app/" + C + "/pg/b1"
	tests := []struct {
		name  string
		setup func(f *fixture)
		want  State
	}{
		{"retained", func(f *fixture) { f.manifest(H, dir, "Retain", old, nil) }, StateRetained},
		{"invalid-manifest", func(f *fixture) { f.rawManifest(dir+"/"+DefaultManifestName, []byte("{"), old) }, StateInvalidManifest},
		{"too-young", func(f *fixture) { f.manifest(H, dir, "Delete", old, nil); f.put(dir+"/late", 1, young) }, StateTooYoung},
		{"orphan", func(f *fixture) { f.manifest(H, dir, "Delete", old, nil) }, StateOrphan},
	}
	for _, tt := range tests {
		t.Run("case19/"+tt.name, func(t *testing.T) {
			f := newFixture().withH("Released")
			f.put(dir+"/data", 10, old)
			tt.setup(f)
			pl := f.plan(t)
			if c := mustFind(t, pl, TypeOrphanRepositoryRoot, H); c.State != StateOrphan {
				t.Fatalf("plan state %s", c.State)
			}
			fin, err := FinalSnapshot(pl, f.inv(), f.listing(), now)
			if err != nil {
				t.Fatal(err)
			}
			c := mustFind(t, fin, TypeOrphanRepositoryRoot, H)
			if c.State != tt.want || c.DeferredScan {
				t.Fatalf("state %s (%s) deferred %v", c.State, c.Reason, c.DeferredScan)
			}
			if tt.want == StateOrphan {
				if c.ObjectCount != len(f.objs) || fin.DeleteObjects != int64(len(f.objs)) {
					t.Fatalf("count %d/%d, want %d", c.ObjectCount, fin.DeleteObjects, len(f.objs))
				}
				if err := GlobalGuards(fin); err != nil {
					t.Fatal(err)
				}
			} else if c.Objects != nil {
				t.Fatal("snapshot of a non-orphan must be dropped")
			}
		})
	}
}

// A root that only a Released pre-check PV points to is the repository's
// own historical root (3.4.2), not storage in use (2.11): it collapses into
// an orphan repository root instead of staying a protected stray. A Bound
// pre-check PV, in use by its claim, still protects its root.
func TestReleasedPreCheckPVIsAnOrphanRoot(t *testing.T) {
	preCheck, ok := PreCheckPVCName("repo", repoUID)
	if !ok {
		t.Fatal("no pre-check name")
	}
	for _, phase := range []string{"Released", "Bound"} {
		t.Run(phase, func(t *testing.T) {
			f := newFixture()
			f.in.PVs = append(f.in.PVs, PV{Name: H, StorageClassName: "sc-repo", Phase: phase, ClaimNamespace: "kb-system",
				ClaimName: preCheck, CSIDriver: CSIDriverS3, VolumeHandle: bkt + "/" + H})
			f.put(H+"/probe", 10, old)
			pl := f.plan(t)
			c := find(pl, TypeOrphanRepositoryRoot, H)
			if phase == "Released" {
				if c == nil || c.State != StateOrphan {
					t.Fatalf("a Released pre-check PV's root must be an orphan repository root:\n%s", dump(pl))
				}
				return
			}
			if c != nil && c.State == StateOrphan {
				t.Fatalf("a Bound pre-check PV's root is in use:\n%s", dump(pl))
			}
		})
	}
}
