package prune

import (
	"strings"
	"testing"
)

// Ownership index: which roots the repository PVs (the Backup PVC's and
// the pre-check PVC's) own, current only when Bound; any other claim makes
// a user root, and a user owner beats a repository.
func TestOwnershipIndex_3_4(t *testing.T) {
	S := "pvc-66666666-6666-4666-8666-666666666666"
	pre, _ := PreCheckPVCName("repo", repoUID)
	repoPV := func(name, claim, phase, handle string) PV {
		return PV{Name: name, StorageClassName: "sc-repo", Phase: phase, ClaimNamespace: "kb-system", ClaimName: claim,
			CSIDriver: CSIDriverS3, VolumeHandle: handle}
	}
	userPV := PV{Name: "pv-user", StorageClassName: "standard", Phase: "Bound", ClaimNamespace: "app", ClaimName: "data",
		CSIDriver: CSIDriverS3, VolumeHandle: bkt + "/" + S}
	tests := []struct {
		name string
		pvs  []PV
		root string
		want VolumeOwner
	}{
		{"case20/2.2,3.4.2 released pre-check PV is historical", []PV{repoPV(S, pre, "Released", bkt+"/"+S)}, S,
			VolumeOwner{Kind: OwnerRepository, Namespace: "kb-system", Current: false, Resource: "PersistentVolume/" + S}},
		{"case20/2.2,3.4.2 bound pre-check PV is current", []PV{repoPV(S, pre, "Bound", bkt+"/"+S)}, S,
			VolumeOwner{Kind: OwnerRepository, Namespace: "kb-system", Current: true, Resource: "PersistentVolume/" + S}},
		{"case21/2.2 wrong uid prefix is a user root", []PV{repoPV(S, "pre-check-87654321-repo", "Released", bkt+"/"+S)}, S,
			VolumeOwner{Kind: OwnerUser, Namespace: "kb-system", Resource: "PersistentVolume/" + S}},
		{"case22/3.4.4 user beats repository (repo first)", []PV{repoPV("pv-r", "pvc-repo-x", "Released", bkt+"/"+S), userPV}, S,
			VolumeOwner{Kind: OwnerUser, Namespace: "app", Current: true, Resource: "PersistentVolume/pv-user"}},
		{"case22/3.4.4 user beats repository (user first)", []PV{userPV, repoPV("pv-r", "pvc-repo-x", "Released", bkt+"/"+S)}, S,
			VolumeOwner{Kind: OwnerUser, Namespace: "app", Current: true, Resource: "PersistentVolume/pv-user"}},
		{"case23/3.4.5 other claim on the repo class is a user root", []PV{repoPV(S, "user-data", "Released", bkt+"/"+S)}, S,
			VolumeOwner{Kind: OwnerUser, Namespace: "kb-system", Resource: "PersistentVolume/" + S}},
		{"3.4.6 s3 URL handle", []PV{repoPV("x", "pvc-repo-x", "Released", "s3://"+bkt+"/"+S)}, S,
			VolumeOwner{Kind: OwnerRepository, Namespace: "kb-system", Resource: "PersistentVolume/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			f.in.PVs = append(f.in.PVs, tt.pvs...)
			inv := f.inv()
			if got := inv.Owners[tt.root]; got != tt.want {
				t.Fatalf("owner %+v, want %+v", got, tt.want)
			}
			if len(inv.Blockers) > 0 {
				t.Fatalf("blockers %v", inv.Blockers)
			}
		})
	}
	t.Run("case21/2.2 pre-check name truncation", func(t *testing.T) {
		long := strings.Repeat("r", 44) + "-" + strings.Repeat("s", 15)
		n, ok := PreCheckPVCName(long, repoUID)
		if !ok || len(n) > 63 || strings.HasSuffix(n, "-") {
			t.Fatalf("%q", n)
		}
		if n != strings.TrimRight(("pre-check-12345678-" + long)[:63], "-") {
			t.Fatalf("%q", n)
		}
		if _, ok := PreCheckPVCName("repo", "1234567"); ok {
			t.Fatal("short uid must give no name")
		}
	})
	t.Run("3.4.3 mapping and current repository root", func(t *testing.T) {
		inv := newFixture().inv()
		if inv.Mapping["app"] != R || !inv.Owners[R].Current || inv.Owners[R].Kind != OwnerRepository {
			t.Fatalf("%v %+v", inv.Mapping, inv.Owners[R])
		}
		if inv.Owners[U].Kind != OwnerUser {
			t.Fatalf("%+v", inv.Owners[U])
		}
	})
}

func TestInventoryBlockers_4_2(t *testing.T) {
	tests := []struct {
		name string
		mut  func(f *fixture)
		want string
	}{
		{"restores unlisted", func(f *fixture) { f.in.RestoresErr = errTest }, "restores cannot be listed"},
		{"incomplete active restore", func(f *fixture) { f.in.Restores = []Restore{{Namespace: "app", Name: "r"}} }, "incomplete"},
		{"storage class unreadable", func(f *fixture) { f.in.StorageClassErr = errTest }, "cannot be read"},
		{"bucket mismatch", func(f *fixture) { f.in.StorageClass.Parameters["bucket"] = "other" }, "differs"},
		{"pvcs unlisted", func(f *fixture) { f.in.PVCsErr = errTest }, "claims cannot be listed"},
		{"pvs unlisted", func(f *fixture) { f.in.PVsErr = errTest }, "volumes cannot be listed"},
		{"wrong repo label", func(f *fixture) { f.in.PVCs[0].Labels[LabelBackupRepoName] = "other" }, "labelled"},
		{"case53/4.1 backup pvc unbound", func(f *fixture) { f.in.PVCs[0].VolumeName = "" }, "not bound"},
		{"pv missing", func(f *fixture) { f.in.PVs = f.in.PVs[1:] }, "missing"},
		{"driver mismatch", func(f *fixture) { f.in.PVs[0].CSIDriver = "other" }, "not a CSI volume"},
		{"unsupported driver", func(f *fixture) {
			f.in.StorageClass.Provisioner = "other"
			f.in.PVs[0].CSIDriver = "other"
		}, "not supported"},
		{"unmappable handle", func(f *fixture) { f.in.PVs[0].VolumeHandle = "gs://x/y" }, "cannot be mapped"},
		{"backup pvc missing", func(f *fixture) { f.in.PVCs = f.in.PVCs[1:] }, "not found in any namespace"},
		{"backup pvc not in namespace", func(f *fixture) { f.in.Namespace = "other" }, "not found in namespace other"},
		{"overlapping roots", func(f *fixture) {
			f.in.PVCs = append(f.in.PVCs, PVC{Namespace: "b", Name: "pvc-repo-x", UID: "77777777-7777-4777-8777-777777777777", VolumeName: "pv-b", StorageClassName: "sc-repo"})
			f.in.PVs = append(f.in.PVs, PV{Name: "pv-b", StorageClassName: "sc-repo", ClaimNamespace: "b", ClaimName: "pvc-repo-x", CSIDriver: CSIDriverS3, VolumeHandle: bkt + "/" + R + "/sub", Phase: "Bound"})
		}, "overlap"},
		{"other pvc bound without volume", func(f *fixture) {
			f.in.PVCs = append(f.in.PVCs, PVC{Namespace: "app", Name: "w", StorageClassName: "sc-repo", Phase: "Bound"})
		}, "pvc app/w is not bound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			tt.mut(f)
			inv := f.inv()
			if !strings.Contains(strings.Join(inv.Blockers, "\n"), tt.want) {
				t.Fatalf("blockers %q, want %q", inv.Blockers, tt.want)
			}
		})
	}
	t.Run("4.3 pathPrefix in Mount mode", func(t *testing.T) {
		f := newFixture()
		f.in.Repo.PathPrefix = "team"
		f.put(R+"/x", 1, old)
		if pl := f.plan(t); !pl.Blocked() || !strings.Contains(pl.BlockingReasons[0], "pathPrefix") {
			t.Fatal(pl.BlockingReasons)
		}
	})
	t.Run("clean fixture has no blockers", func(t *testing.T) {
		if b := newFixture().inv().Blockers; len(b) > 0 {
			t.Fatal(b)
		}
	})
}

func TestStorageProtections_2_11(t *testing.T) {
	f := newFixture()
	f.in.PVCs = append(f.in.PVCs, PVC{Namespace: "app", Name: "w", UID: "88888888-8888-4888-8888-888888888888", StorageClassName: "sc-repo", VolumeName: "pv-w", Phase: "Bound"})
	f.in.PVs = append(f.in.PVs, PV{Name: "pv-w", StorageClassName: "sc-repo", Phase: "Bound", ClaimNamespace: "app", ClaimName: "w",
		CSIDriver: CSIDriverS3, VolumeHandle: bkt + "/a",
		VolumeAttributes: map[string]string{"prefix": "b", "subPath": "c/d", "options": "--memory-limit 1000 --subdir=e --prefix f"},
		MountOptions:     []string{"--path=g"}})
	inv := f.inv()
	var got []string
	for _, p := range inv.StorageProtections {
		got = append(got, p.Prefix)
	}
	want := "a,b,c/d,e,f,g,pv-w,pvc-88888888-8888-4888-8888-888888888888"
	if strings.Join(got, ",") != want {
		t.Fatalf("got %v, want %s", got, want)
	}
}
