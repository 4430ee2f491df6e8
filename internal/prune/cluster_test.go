package prune

import (
	"strings"
	"testing"
)

// Cluster directories, --prefix, repository strays and directory markers:
// how unreferenced clusters split into candidates, what a partial --prefix
// protects, when strays are listed, protected or eligible, and that
// markers alone never make a candidate.
func TestClustersAndStrays(t *testing.T) {
	cd := R + "/app/" + C
	pg := cd + "/pg"
	liveRef := func(f *fixture) {
		f.backup("live", func(b *Backup) {
			b.Labels = map[string]string{LabelClusterUID: uuidA}
			b.Path = "/app/" + C + "/pg/live"
		})
		f.put(pg+"/live/data", 1, old)
	}
	strays := func(f *fixture) {
		f.put(R+"/loose", 1, old)
		f.put(R+"/app/loose", 2, old)
		f.put(cd+"/unexpected.bin", 3, old)
	}
	tests := []struct {
		name  string
		setup func(f *fixture)
		check func(t *testing.T, pl Plan)
	}{
		{"case40/3.7.4 unreferenced cluster under storage protection", func(f *fixture) {
			f.put(pg+"/b1/data", 1, old)
			addStoragePVC(f, bkt+"/"+cd)
		}, func(t *testing.T, pl Plan) {
			c := mustFind(t, pl, TypeOrphanClusterRoot, cd)
			if c.State != StateProtected || c.Visible() || len(listedBelow(pl, cd, false)) > 0 {
				t.Fatal(dump(pl))
			}
		}},
		{"case41/3.7.2,3.7.5,3.11 prefix inside a backup of a referenced cluster", func(f *fixture) {
			liveRef(f)
			f.put(pg+"/b1/data", 1, old)
			f.put(pg+"/b2/data", 1, old)
			f.opts.Prefix = pg + "/b1/data"
		}, func(t *testing.T, pl Plan) {
			c := mustFind(t, pl, TypeBackup, pg+"/b1")
			wantState(t, c, StateProtected, "only part")
			if !c.DeletionConfigurable || len(pl.Candidates) != 1 {
				t.Fatal(dump(pl))
			}
		}},
		{"case42/3.7.3,3.11 prefix at component level of an unreferenced cluster", func(f *fixture) {
			f.put(pg+"/b1/data", 1, old)
			f.opts.Prefix = pg
		}, func(t *testing.T, pl Plan) {
			c := mustFind(t, pl, TypeOrphanClusterRoot, cd)
			wantState(t, c, StateProtected, "only part")
			if !c.DeletionConfigurable || !c.DeferredScan || len(pl.Candidates) != 1 || len(listedBelow(pl, cd, false)) > 0 {
				t.Fatal(dump(pl))
			}
		}},
		{"case42/3.7.3,3.11 prefix naming a whole backup of an unreferenced cluster", func(f *fixture) {
			f.put(pg+"/b1/data", 1, old)
			f.opts.Prefix = pg + "/b1"
		}, func(t *testing.T, pl Plan) {
			wantState(t, mustFind(t, pl, TypeOrphanClusterRoot, cd), StateProtected, "only part")
			if len(pl.Candidates) != 1 {
				t.Fatal(dump(pl))
			}
		}},
		{"case43/3.7.5,3.7.6 unreferenced cluster splits into backups", func(f *fixture) {
			f.manifest(R, pg+"/b-old", "Delete", old, nil)
			f.put(pg+"/b-old/data", 1, old)
			f.manifest(R, pg+"/b-young", "Delete", young, nil)
			f.put(pg+"/b-young/data", 1, young)
		}, func(t *testing.T, pl Plan) {
			wantState(t, mustFind(t, pl, TypeBackup, pg+"/b-old"), StateOrphan, "")
			wantState(t, mustFind(t, pl, TypeBackup, pg+"/b-young"), StateTooYoung, "")
			if find(pl, TypeOrphanClusterRoot, cd) != nil || len(pl.Candidates) != 2 || pl.DeleteObjects != 2 {
				t.Fatal(dump(pl))
			}
		}},
		{"case45/Conventions,3.11 whole-segment prefix", func(f *fixture) {
			liveRef(f)
			f.put(pg+"/b1/data", 1, old)
			f.put(pg+"/b10/data", 7, old)
			f.opts.Prefix = pg + "/b1"
		}, func(t *testing.T, pl Plan) {
			c := mustFind(t, pl, TypeBackup, pg+"/b1")
			wantState(t, c, StateOrphan, "")
			if c.ObjectCount != 1 || c.Bytes != 1 || len(pl.Candidates) != 1 {
				t.Fatal(dump(pl))
			}
		}},
		{"case46/3.10.1,3.10.2 strays protected by default", strays, func(t *testing.T, pl Plan) {
			for _, p := range []string{R, R + "/app", cd} {
				c := mustFind(t, pl, TypeRepositoryStray, p)
				wantState(t, c, StateProtected, "--delete-repository-stray")
				if !c.DeletionConfigurable || c.ObjectCount != 1 {
					t.Fatal(dump(pl))
				}
			}
		}},
		{"case47/3.10.3 stray directories are not listed", func(f *fixture) {
			f.put(R+"/Bad_NS/x", 1, old)
			f.put(R+"/app/not-a-cluster/x", 1, old)
		}, func(t *testing.T, pl Plan) {
			for _, p := range []string{R + "/Bad_NS", R + "/app/not-a-cluster"} {
				c := mustFind(t, pl, TypeRepositoryStray, p)
				wantState(t, c, StateProtected, "recursive listing skipped")
			}
			if n := listedBelow(pl, R, true); len(n) > 0 {
				t.Fatalf("recursive listings %v", n)
			}
		}},
		{"case48/3.10.4 strays eligible with the flag", func(f *fixture) {
			strays(f)
			f.put(R+"/Bad_NS/x", 4, old)
			f.opts.DeleteRepositoryStray = true
		}, func(t *testing.T, pl Plan) {
			for _, p := range []string{R, R + "/app", cd, R + "/Bad_NS"} {
				wantState(t, mustFind(t, pl, TypeRepositoryStray, p), StateOrphan, "")
			}
			if c := mustFind(t, pl, TypeRepositoryStray, cd); len(c.FullScope) != 1 {
				t.Fatalf("full scope %v", c.FullScope)
			}
		}},
		{"case49/3.10.4 uncertain reference protects the cluster stray", func(f *fixture) {
			strays(f)
			f.opts.DeleteRepositoryStray = true
			f.backup("y", func(b *Backup) { b.Labels = map[string]string{LabelClusterUID: uuidA} })
		}, func(t *testing.T, pl Plan) {
			c := mustFind(t, pl, TypeRepositoryStray, cd)
			wantState(t, c, StateProtected, "uncertain")
			if c.Visible() {
				t.Fatal("hard protection must be hidden")
			}
			wantState(t, mustFind(t, pl, TypeRepositoryStray, R), StateOrphan, "")
		}},
		{"3.10.4 young stray", func(f *fixture) {
			f.put(R+"/loose", 1, young)
			f.opts.DeleteRepositoryStray = true
		}, func(t *testing.T, pl Plan) {
			wantState(t, mustFind(t, pl, TypeRepositoryStray, R), StateTooYoung, "")
		}},
		{"3.10.5 strays filtered by prefix", func(f *fixture) {
			strays(f)
			f.opts.Prefix = R + "/app"
		}, func(t *testing.T, pl Plan) {
			if find(pl, TypeRepositoryStray, R) != nil || find(pl, TypeRepositoryStray, R+"/app") == nil {
				t.Fatal(dump(pl))
			}
		}},
		{"case50/2.8,3.10.1 markers only", func(f *fixture) {
			f.put(R+"/", 0, old)
			f.put(R+"/app/", 0, old)
			f.put(cd+"/", 0, old)
		}, func(t *testing.T, pl Plan) {
			if len(pl.Candidates) != 0 || pl.ScannedObjects != 3 {
				t.Fatalf("scanned %d\n%s", pl.ScannedObjects, dump(pl))
			}
		}},
		{"case50/2.8,3.10.1 markers plus a loose object", func(f *fixture) {
			f.put(R+"/", 0, old)
			f.put(R+"/app/", 0, old)
			f.put(cd+"/", 0, old)
			f.put(R+"/loose-root", 1, old)
		}, func(t *testing.T, pl Plan) {
			if c := mustFind(t, pl, TypeRepositoryStray, R); c.ObjectCount != 1 || len(pl.Candidates) != 1 {
				t.Fatal(dump(pl))
			}
		}},
		{"case51/3.7.5,3.10.1 non-canonical component and backup names", func(f *fixture) {
			f.put(cd+"/_meta/b/data", 1, old)
			f.put(pg+"/_kopia/data", 1, old)
			f.put(pg+"/b/", 0, old)
		}, func(t *testing.T, pl Plan) {
			c := mustFind(t, pl, TypeRepositoryStray, cd)
			if c.ObjectCount != 2 || len(pl.Candidates) != 1 {
				t.Fatal(dump(pl))
			}
			for _, o := range c.Objects {
				if strings.HasSuffix(o.Key, "/") {
					t.Fatal("marker in stray set")
				}
			}
		}},
		{"case52/2.8 zero-byte object is data", func(f *fixture) { f.put(R+"/app/empty", 0, old) },
			func(t *testing.T, pl Plan) {
				if c := mustFind(t, pl, TypeRepositoryStray, R+"/app"); c.ObjectCount != 1 {
					t.Fatal(dump(pl))
				}
			}},
		{"2.8 marker inside a backup directory joins it", func(f *fixture) {
			f.put(pg+"/b1/data", 1, old)
			f.put(pg+"/b1/sub/", 0, old)
		}, func(t *testing.T, pl Plan) {
			if c := mustFind(t, pl, TypeBackup, pg+"/b1"); c.ObjectCount != 2 {
				t.Fatal(dump(pl))
			}
		}},
		{"2.8 markers alone create no backup", func(f *fixture) { f.put(pg+"/b1/sub/", 0, old) },
			func(t *testing.T, pl Plan) {
				if len(pl.Candidates) != 0 {
					t.Fatal(dump(pl))
				}
			}},
		{"3.3.3 namespace skips other namespaces' roots", func(f *fixture) {
			f.withH("Released")
			f.in.PVs[len(f.in.PVs)-1].ClaimNamespace = "other"
			f.put(H+"/other/x", 1, old)
			f.put(R+"/app/loose", 1, old)
			f.opts.Namespace = "app"
		}, func(t *testing.T, pl Plan) {
			if find(pl, TypeOrphanRepositoryRoot, H) != nil || pl.VolumeRootCounts.Total != 1 {
				t.Fatal(dump(pl))
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
