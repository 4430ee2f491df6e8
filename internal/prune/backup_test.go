package prune

import (
	"encoding/json"
	"strings"
	"testing"
)

// Backup candidates: which backups a prune may delete and which it must
// keep (live, retained, invalid manifest, too young, restore, dependency,
// storage or kopia protection).
func TestBackupCandidates_3_8(t *testing.T) {
	d := R + "/app/" + C + "/pg"
	b1 := d + "/b1"
	withB1 := func(policy string, mut func(map[string]any)) func(f *fixture) {
		return func(f *fixture) {
			f.manifest(R, b1, policy, old, mut)
			f.put(b1+"/data", 100, old)
		}
	}
	hist := func(f *fixture) { f.put(d+"/hist/hist.tar.zst", 50, old) }
	tests := []struct {
		name   string
		setup  func(f *fixture)
		prefix string
		state  State
		reason string
		check  func(t *testing.T, pl Plan, c *Candidate)
	}{
		{name: "case24/3.8.1 orphan backup", setup: withB1("Delete", nil), prefix: b1, state: StateOrphan,
			check: func(t *testing.T, pl Plan, c *Candidate) {
				if c.ObjectCount != 2 || c.Backup != (BackupKey{"app", "b1"}) || c.UID != "uid-b1" || c.ManifestETag == "" {
					t.Fatalf("%+v", c)
				}
			}},
		{name: "case25/3.8.2(2) same key and uid", setup: func(f *fixture) {
			withB1("Delete", nil)(f)
			f.backup("b1", nil)
		}, prefix: b1, state: StateLive, reason: "exists",
			check: func(t *testing.T, pl Plan, c *Candidate) {
				if c.Visible() {
					t.Fatal("live must be hidden")
				}
			}},
		{name: "case25/3.8.2(2) recreated name", setup: func(f *fixture) {
			withB1("Delete", nil)(f)
			f.backup("b1", func(b *Backup) { b.UID = "other" })
		}, prefix: b1, state: StateLive, reason: "recreated"},
		{name: "case26/3.8.2(7) retained", setup: withB1("Retain", nil), prefix: b1, state: StateRetained,
			check: func(t *testing.T, pl Plan, c *Candidate) {
				if !c.Visible() {
					t.Fatal("retained must be shown")
				}
			}},
		{name: "case26/3.8.2(7) include-retained", setup: func(f *fixture) {
			withB1("Retain", nil)(f)
			f.opts.IncludeRetained = true
		}, prefix: b1, state: StateOrphan},
		{name: "case27/3.8.2(1) unknown policy", setup: withB1("Archive", nil), prefix: b1, state: StateInvalidManifest, reason: "deletionPolicy",
			check: func(t *testing.T, pl Plan, c *Candidate) {
				if c.Visible() {
					t.Fatal("invalid-manifest must be hidden")
				}
			}},
		{name: "case27/3.8.2(1) empty uid", setup: withB1("Delete", func(m map[string]any) { sub(m, "metadata")["uid"] = "" }),
			prefix: b1, state: StateInvalidManifest, reason: "identity"},
		{name: "case27/3.8.2(1) wrong kind", setup: withB1("Delete", func(m map[string]any) { m["kind"] = "Secret" }),
			prefix: b1, state: StateInvalidManifest, reason: "kind"},
		{name: "3.8.2(1) missing creationTimestamp", setup: withB1("Delete", func(m map[string]any) { delete(sub(m, "metadata"), "creationTimestamp") }),
			prefix: b1, state: StateInvalidManifest, reason: "creationTimestamp"},
		{name: "3.8.2(1) basename differs from name", setup: withB1("Delete", func(m map[string]any) { sub(m, "metadata")["name"] = "b2" }),
			prefix: b1, state: StateInvalidManifest, reason: "named after"},
		{name: "case28/3.8.1(2) path mismatch", setup: withB1("Delete", func(m map[string]any) { sub(m, "status")["path"] = "/app/" + C + "/pg/other" }),
			prefix: b1, state: StateInvalidManifest, reason: "status.path"},
		{name: "case28/3.8.1(2) other repo", setup: withB1("Delete", func(m map[string]any) { sub(m, "status")["backupRepoName"] = "other" }),
			prefix: b1, state: StateInvalidManifest, reason: "repo"},
		{name: "3.8.1(2) repo label fallback", setup: withB1("Delete", func(m map[string]any) {
			sub(m, "status")["backupRepoName"] = ""
			sub(m, "metadata")["labels"] = map[string]any{LabelBackupRepoName: "repo"}
		}), prefix: b1, state: StateOrphan},
		{name: "3.8.1(2) absolute path already under the root", setup: withB1("Delete", func(m map[string]any) { sub(m, "status")["path"] = b1 }),
			prefix: b1, state: StateOrphan},
		{name: "case29/3.8.2(1) cluster-uid label differs", setup: withB1("Delete", func(m map[string]any) {
			sub(m, "metadata")["labels"] = map[string]any{LabelClusterUID: uuidB}
		}), prefix: b1, state: StateInvalidManifest, reason: "cluster-uid"},
		{name: "case30/2.7 trailing JSON", setup: func(f *fixture) {
			f.rawManifest(b1+"/"+DefaultManifestName, []byte(`{"kind":"Backup"}{}`), old)
		}, prefix: b1, state: StateInvalidManifest, reason: "trailing"},
		{name: "case30/2.7 manifest over 4 MiB", setup: func(f *fixture) {
			f.rawManifest(b1+"/"+DefaultManifestName, []byte(`{"x":"`+strings.Repeat("a", 5<<20)+`"}`), old)
		}, prefix: b1, state: StateInvalidManifest, reason: "limit"},
		{name: "2.7 unreadable manifest", setup: func(f *fixture) {
			f.put(b1+"/"+DefaultManifestName, 10, old)
		}, prefix: b1, state: StateInvalidManifest, reason: "not read"},
		{name: "2.7 manifest key not normalised", setup: func(f *fixture) {
			f.rawManifest(R+"/app/"+C+"/pg//b1/"+DefaultManifestName, []byte("{}"), old)
			f.put(b1+"/data", 1, old)
		}, prefix: b1, state: StateInvalidManifest, reason: "normalised"},
		{name: "case31/3.8.2(8) young creationTimestamp", setup: withB1("Delete", func(m map[string]any) {
			sub(m, "metadata")["creationTimestamp"] = young.Format("2006-01-02T15:04:05Z07:00")
		}), prefix: b1, state: StateTooYoung, reason: "creationTimestamp"},
		{name: "case31/3.8.2(8) young manifest LastModified", setup: func(f *fixture) {
			f.manifest(R, b1, "Delete", young, nil)
		}, prefix: b1, state: StateTooYoung, reason: "manifest"},
		{name: "case32/3.8.3 manifest-less backup", setup: hist, prefix: d + "/hist", state: StateOrphan,
			check: func(t *testing.T, pl Plan, c *Candidate) {
				if c.ManifestKey != "" || !c.CreatedAt.Equal(old) || c.Backup != (BackupKey{"app", "hist"}) {
					t.Fatalf("%+v", c)
				}
			}},
		{name: "case33/3.8.2(11) young object", setup: func(f *fixture) { f.put(d+"/hist/x", 1, young) },
			prefix: d + "/hist", state: StateTooYoung, reason: "younger"},
		{name: "case33/3.8.2(11) object without timestamp", setup: func(f *fixture) { f.put(d+"/hist/x", 1, old); f.objs[0].LastModified = zeroTime },
			prefix: d + "/hist", state: StateTooYoung, reason: "no timestamp"},
		{name: "case34/2.10,3.8.1(4) running Restore", setup: func(f *fixture) {
			hist(f)
			f.in.Restores = []Restore{{Namespace: "app", Name: "r", Phase: "Running", BackupNamespace: "app", BackupName: "hist"}}
		}, prefix: d + "/hist", state: StateProtected, reason: "Restore"},
		{name: "case34/2.10 completed Restore", setup: func(f *fixture) {
			hist(f)
			f.in.Restores = []Restore{{Namespace: "app", Name: "r", Phase: "Completed", BackupNamespace: "app", BackupName: "hist"}}
		}, prefix: d + "/hist", state: StateOrphan},
		{name: "case35/3.8.4 parent of a live Backup", setup: func(f *fixture) {
			hist(f)
			f.backup("live", func(b *Backup) { b.ParentBackupName = "hist"; b.Path = "/app/" + C + "/pg/live" })
		}, prefix: d + "/hist", state: StateDependency},
		{name: "case36/3.8.4 transitive chain", setup: func(f *fixture) {
			f.backup("live", func(b *Backup) { b.SpecParentBackupName = "b2"; b.Path = "/app/" + C + "/pg/live" })
			f.manifest(R, d+"/b2", "Delete", old, func(m map[string]any) { sub(m, "spec")["parentBackupName"] = "b1" })
			f.manifest(R, b1, "Delete", old, nil)
		}, prefix: b1, state: StateDependency,
			check: func(t *testing.T, pl Plan, c *Candidate) {
				wantState(t, mustFind(t, pl, TypeBackup, d+"/b2"), StateDependency, "")
			}},
		{name: "case37/3.8.4 base of a live Backup", setup: func(f *fixture) {
			withB1("Delete", nil)(f)
			f.backup("live", func(b *Backup) { b.BaseBackupName = "b1"; b.Path = "/app/" + C + "/pg/live" })
		}, prefix: b1, state: StateDependency},
		{name: "case38/3.8.2(4) live status.path overlaps", setup: func(f *fixture) {
			withB1("Delete", nil)(f)
			f.backup("x", func(b *Backup) { b.Path = "/app/" + C + "/pg" })
		}, prefix: b1, state: StateLive, reason: "overlaps a live Backup CR"},
		{name: "case39/3.8.2(5),3.8.6 kopia path", setup: func(f *fixture) {
			f.put(d+"/kopia/p0001", 5, old)
			f.backup("k", func(b *Backup) { b.KopiaRepoPath = "/app/" + C + "/pg/kopia" })
		}, prefix: d + "/kopia", state: StateProtected, reason: "kopia"},
		{name: "3.8.6 kopia directory of a cluster in use", setup: func(f *fixture) {
			f.put(d+"/kopia/p0001", 5, old)
			f.backup("k", func(b *Backup) { b.Labels = map[string]string{LabelClusterUID: uuidA} })
		}, prefix: d + "/kopia", state: StateProtected, reason: "kopia"},
		{name: "3.8.2(6) storage protection", setup: func(f *fixture) {
			withB1("Delete", nil)(f)
			f.backup("live", func(b *Backup) {
				b.Labels = map[string]string{LabelClusterUID: uuidA}
				b.Path = "/app/" + C + "/pg/live"
			})
			addStoragePVC(f, bkt+"/"+b1)
		}, prefix: b1, state: StateProtected, reason: "storage"},
		{name: "3.8.5 nested Retain manifest", setup: func(f *fixture) {
			withB1("Delete", nil)(f)
			body, _ := json.Marshal(manifestDoc(R, b1, "Retain"))
			f.rawManifest(b1+"/target/"+DefaultManifestName, body, old)
		}, prefix: b1, state: StateRetained, reason: "nested"},
		{name: "3.8.5 nested invalid manifest", setup: func(f *fixture) {
			withB1("Delete", nil)(f)
			f.rawManifest(b1+"/target/pod-0/"+DefaultManifestName, []byte("[]"), old)
		}, prefix: b1, state: StateInvalidManifest, reason: "nested"},
		{name: "3.8.4,3.11 sibling outside --prefix still protects its parent", setup: func(f *fixture) {
			f.backup("live", func(b *Backup) {
				b.Labels = map[string]string{LabelClusterUID: uuidA}
				b.Path = "/app/" + C + "/pg/live"
			})
			withB1("Delete", nil)(f)
			f.manifest(R, d+"/b2", "Retain", old, func(m map[string]any) { sub(m, "status")["parentBackupName"] = "b1" })
			f.opts.Prefix = b1
		}, prefix: b1, state: StateDependency},
		{name: "3.8.3 custom manifest name", setup: func(f *fixture) {
			f.opts.ManifestName = "m.json"
			f.rawManifest(b1+"/m.json", []byte("{"), old)
		}, prefix: b1, state: StateInvalidManifest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			tt.setup(f)
			pl := f.plan(t)
			c := mustFind(t, pl, TypeBackup, tt.prefix)
			wantState(t, c, tt.state, tt.reason)
			if tt.check != nil {
				tt.check(t, pl, c)
			}
			if len(pl.BlockingReasons) > 0 {
				t.Fatalf("blockers %v", pl.BlockingReasons)
			}
		})
	}
}

// addStoragePVC adds a PVC on the repo StorageClass whose PV handle is h.
func addStoragePVC(f *fixture, h string) {
	f.in.PVCs = append(f.in.PVCs, PVC{Namespace: "app", Name: "other", UID: "55555555-5555-4555-8555-555555555555",
		StorageClassName: "sc-repo", VolumeName: "pv-other", Phase: "Bound"})
	f.in.PVs = append(f.in.PVs, PV{Name: "pv-other", StorageClassName: "sc-repo", Phase: "Bound", ClaimNamespace: "app",
		ClaimName: "other", CSIDriver: CSIDriverS3, VolumeHandle: h})
}
