package prune

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestKeys_Conventions_2_5_2_6(t *testing.T) {
	norm := []struct{ in, want string }{
		{" /a//b/./c/ ", "a/b/c"}, {"a/b/../c", "a/c"}, {"/", ""}, {"", ""},
	}
	for _, n := range norm {
		if got, ok := NormalizeKey(n.in); !ok || got != n.want {
			t.Errorf("NormalizeKey(%q) = %q,%v", n.in, got, ok)
		}
	}
	if _, ok := NormalizeKey("a/../../b"); ok {
		t.Error("escape must fail")
	}
	contains := []struct {
		p, k string
		want bool
	}{{"", "x", true}, {"a/b", "a/b", true}, {"a/b", "a/b/c", true}, {"a/b", "a/bc", false}, {"a/b/c", "a/b", false}}
	for _, c := range contains {
		if Contains(c.p, c.k) != c.want {
			t.Errorf("Contains(%q,%q)", c.p, c.k)
		}
	}
	if !Overlaps("a/b", "a") || Overlaps("a/b", "a/c") {
		t.Error("overlaps")
	}
	for s, want := range map[string]bool{
		R: true, "pvc-11111111-1111-4111-8111-11111111111A": false, "PVC-11111111-1111-4111-8111-111111111111": false,
		"pvc-{11111111-1111-4111-8111-111111111111}": false, "pvc-urn:uuid:11111111-1111-4111-8111-111111111111": false,
		"pvc-11111111111141118111111111111111": false, R + "/x": false,
	} {
		if IsCanonicalRoot(s) != want {
			t.Errorf("IsCanonicalRoot(%q) != %v", s, want)
		}
	}
	for s, want := range map[string]bool{C: true, "-" + uuidA: false, "db" + uuidA: false, "db-" + strings.ToUpper(uuidA): false, "a-b-" + uuidA: true} {
		if _, _, ok := ParseClusterDir(s); ok != want {
			t.Errorf("ParseClusterDir(%q) != %v", s, want)
		}
	}
	if !IsDNSLabel("pg") || IsDNSLabel("_meta") || IsDNSLabel("Bad_NS") || IsDNSLabel(strings.Repeat("a", 64)) || IsDNSLabel("-a") {
		t.Error("labels")
	}
	if !IsDNSSubdomain("b1.x") || IsDNSSubdomain("_kopia") || IsDNSSubdomain("a..b") || !IsDNSSubdomain(strings.Repeat("a", 100)) {
		t.Error("subdomains")
	}
	for _, h := range []struct{ in, want string }{{"bkt/pvc-x", "pvc-x"}, {"s3://bkt/pvc-x/", "pvc-x"}, {"bkt", ""}, {" pvc-x ", "pvc-x"}} {
		if got, ok := NormalizeVolumeHandle(h.in, bkt); !ok || got != h.want {
			t.Errorf("NormalizeVolumeHandle(%q) = %q,%v", h.in, got, ok)
		}
	}
	for _, h := range []string{"s3://other/pvc-x", "gs://bkt/pvc-x"} {
		if _, ok := NormalizeVolumeHandle(h, bkt); ok {
			t.Errorf("NormalizeVolumeHandle(%q) must fail", h)
		}
	}
}

// Delete batches: at most 1000 objects a request, Key or Key+VersionId
// bodies, GCS generations, the manifest in the last batch, and how a
// DeleteObjects response is tallied.
func TestDeleteBatches_7(t *testing.T) {
	mk := func(n int) Candidate {
		c := Candidate{Type: TypeOrphanVolumeRoot}
		for i := range n {
			c.Objects = append(c.Objects, Object{Key: fmt.Sprintf("%s/%04d", O, i), ETag: "e", Size: 1})
		}
		return c
	}
	t.Run("case67/7.2 1001 objects", func(t *testing.T) {
		bs, err := DeleteBatches(mk(1001), DeleteIdentity{}, "")
		if err != nil || len(bs) != 2 || len(bs[0]) != 1000 || len(bs[1]) != 1 {
			t.Fatalf("%v %d", err, len(bs))
		}
		if bs[0][0].VersionID != "" {
			t.Fatal("an unversioned body sends Key only")
		}
	})
	t.Run("case70/7.5 versioned body", func(t *testing.T) {
		c := Candidate{Objects: []Object{{Key: "k", VersionID: "v1"}}}
		bs, err := DeleteBatches(c, DeleteIdentity{Versioned: true}, "")
		if err != nil || bs[0][0].VersionID != "v1" {
			t.Fatal(err)
		}
	})
	t.Run("case71/7.5,7.6,8.4 gcs generation", func(t *testing.T) {
		c := Candidate{Objects: []Object{{Key: "k", Generation: "7", ETag: "e"}}}
		bs, err := DeleteBatches(c, DeleteIdentity{GCS: true}, "")
		if err != nil || bs[0][0].VersionID != "7" {
			t.Fatal(err)
		}
		c.Objects[0].Generation = ""
		if _, err := DeleteBatches(c, DeleteIdentity{GCS: true}, ""); err == nil || !strings.Contains(err.Error(), "identity missing") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("7.6 plain object without etag", func(t *testing.T) {
		if _, err := DeleteBatches(Candidate{Objects: []Object{{Key: "k"}}}, DeleteIdentity{}, ""); err == nil {
			t.Fatal("want identity missing")
		}
	})
	t.Run("case62/7.7 data, noncurrent manifest, current manifest", func(t *testing.T) {
		m := "d/" + DefaultManifestName
		c := Candidate{Type: TypeBackup, ManifestKey: m, Objects: []Object{
			{Key: m, VersionID: "v2", IsLatest: true}, {Key: m, VersionID: "v1"}, {Key: "d/data", VersionID: "x"}}}
		bs, err := DeleteBatches(c, DeleteIdentity{Versioned: true}, "v2")
		if err != nil {
			t.Fatal(err)
		}
		var order []string
		for _, b := range bs {
			var ks []string
			for _, x := range b {
				ks = append(ks, x.Key+"@"+x.VersionID)
			}
			order = append(order, strings.Join(ks, ","))
		}
		if got := strings.Join(order, " | "); got != "d/data@x | "+m+"@v1 | "+m+"@v2" {
			t.Fatal(got)
		}
		if _, err := DeleteBatches(c, DeleteIdentity{Versioned: true}, "v9"); err == nil {
			t.Fatal("no matching current manifest must fail")
		}
	})
	batch := []DeleteTarget{{Key: "a", Size: 1}, {Key: "b", Size: 2}}
	t.Run("case68/7.4 one deleted, one error", func(t *testing.T) {
		n, bytes, err := TallyBatch(batch, []DeleteTarget{{Key: "a"}}, []DeleteFailure{{Key: "b", Code: "AccessDenied", Message: "no"}})
		if n != 1 || bytes != 1 || err == nil || !strings.Contains(err.Error(), "AccessDenied") {
			t.Fatal(n, bytes, err)
		}
	})
	t.Run("case69/7.4 empty result is success", func(t *testing.T) {
		if n, bytes, err := TallyBatch(batch, nil, nil); n != 2 || bytes != 3 || err != nil {
			t.Fatal(n, bytes, err)
		}
	})
	t.Run("7.2 batch size cap", func(t *testing.T) {
		if bs := Batch(make([]DeleteTarget, 2500), 5000); len(bs) != 3 || len(bs[2]) != 500 {
			t.Fatal(len(bs))
		}
	})
}

// Bucket versioning: parsing --bucket-versioning, resolving the detected
// state, the execution-time re-check, and when version listings and
// --purge-versions are required.
func TestVersioning_6(t *testing.T) {
	for _, in := range []string{"", " AUTO ", "disabled", "Enabled", "suspended"} {
		if _, err := ParseVersioningMode(in); err != nil {
			t.Errorf("%q: %v", in, err)
		}
	}
	if _, err := ParseVersioningMode("x"); err == nil {
		t.Error("an unknown --bucket-versioning value x must fail")
	}
	if st, src, err := ResolveVersioning(ModeAuto, ""); st != VersioningDisabled || src != SourceDetected || err != nil {
		t.Error("an empty status is Disabled (detected)")
	}
	if _, _, err := ResolveVersioning(ModeAuto, "Weird"); err == nil {
		t.Error("an unknown versioning status is fatal")
	}
	if st, src, _ := ResolveVersioning(ModeDisabled, "Enabled"); st != VersioningDisabled || src != SourceOperatorOverride || NeedsVersioningQuery(ModeDisabled) {
		t.Error("an explicit disabled needs no query")
	}
	pl := Plan{Versioning: VersioningDisabled, VersioningSource: SourceDetected}
	if err := CheckVersioningUnchanged(pl, "Enabled"); err == nil || !strings.Contains(err.Error(), "versioning changed") {
		t.Error("a versioning change must abort")
	}
	if err := CheckVersioningUnchanged(Plan{Versioning: VersioningDisabled, VersioningSource: SourceOperatorOverride}, "Enabled"); err != nil {
		t.Error("override is not re-queried")
	}
	if !RequiresPurgeVersions(VersioningSuspended) || RequiresPurgeVersions(VersioningDisabled) {
		t.Error("a suspended bucket must require --purge-versions, a disabled one must not")
	}
	if VersionedListing(true, VersioningDisabled) || !VersionedListing(true, VersioningEnabled) || VersionedListing(false, VersioningEnabled) {
		t.Error("candidate scopes use version listings only with --purge-versions on a versioned bucket")
	}
}

// Confirmation words: each combination of --include-retained and
// --delete-repository-stray requires its own --confirm word.
func TestConfirmationWords_10_3(t *testing.T) {
	tests := []struct {
		retained, stray bool
		word            string
	}{
		{false, false, "DELETE"}, {false, true, "DELETE-STRAY"}, {true, false, "DELETE-RETAINED"}, {true, true, "DELETE-RETAINED-AND-STRAY"},
	}
	for _, tt := range tests {
		opts := Options{IncludeRetained: tt.retained, DeleteRepositoryStray: tt.stray}
		if ConfirmationWord(tt.retained, tt.stray) != tt.word || CheckConfirmation(opts, tt.word) != nil {
			t.Errorf("%+v", tt)
		}
		if err := CheckConfirmation(opts, "DELETE-WRONG"); err == nil || !strings.Contains(err.Error(), "--confirm "+tt.word) {
			t.Errorf("wrong word: %v", err)
		}
	}
}

// Visibility: without --show-all, live candidates and protected user
// volumes are hidden from the state counts.
func TestVisibility_10_8(t *testing.T) {
	pl := Plan{Candidates: []Candidate{
		{Type: TypeBackup, State: StateOrphan},
		{Type: TypeBackup, State: StateLive},
		{Type: TypeRepositoryStray, State: StateProtected, DeletionConfigurable: true},
		{Type: TypeProtectedUserVolume, State: StateProtected},
	}}
	shown := pl.VisibleStateCounts(false)
	if shown[StateOrphan] != 1 || shown[StateProtected] != 1 || shown[StateLive] != 0 {
		t.Fatal(shown)
	}
	if all := pl.VisibleStateCounts(true); all[StateProtected] != 2 || all[StateLive] != 1 {
		t.Fatal(all)
	}
}

// Manifest-driven fallback mode, used when no canonical repository root
// exists.
func TestFallbackMode_3_12(t *testing.T) {
	tool := func() *fixture {
		f := newFixture()
		f.in.Repo.AccessMethod, f.in.Repo.BackupPVCName, f.in.Repo.GeneratedStorageClassName = "Tool", "", ""
		f.in.Repo.PathPrefix = "team"
		f.in.StorageClass, f.in.PVCs, f.in.PVs = nil, nil, nil
		return f
	}
	t.Run("tool mode candidates are blocked", func(t *testing.T) {
		f := tool()
		dir := "team/app/" + C + "/pg/b1"
		f.manifest("", dir, "Delete", old, func(m map[string]any) { sub(m, "status")["path"] = "/" + dir })
		f.put(dir+"/data", 1, old)
		f.put("team/app/other.bin", 4, old)
		f.manifest("", dir+"/inner", "Delete", old, func(m map[string]any) { sub(m, "status")["path"] = "/" + dir + "/inner" })
		pl := f.plan(t)
		if pl.VolumeDiscovery || !pl.Blocked() || pl.UnclassifiedObjects != 1 || pl.UnclassifiedBytes != 4 {
			t.Fatalf("%+v\n%s", pl, dump(pl))
		}
		wantState(t, mustFind(t, pl, TypeBackup, dir), StateProtected, "nested")
		wantState(t, mustFind(t, pl, TypeBackup, dir+"/inner"), StateOrphan, "")
	})
	t.Run("prefix outside the scan prefix is fatal", func(t *testing.T) {
		f := tool()
		f.opts.Prefix = "elsewhere"
		if _, err := NewPlan(f.inv(), f.listing(), f.opts, now); err == nil {
			t.Fatal("want error")
		}
	})
	t.Run("backup pvc without mapping is fatal", func(t *testing.T) {
		f := newFixture()
		f.in.PVCs[0].VolumeName = ""
		f.in.PVs = f.in.PVs[1:] // no repository PV at all
		if _, err := NewPlan(f.inv(), f.listing(), f.opts, now); err == nil || !strings.Contains(err.Error(), "unavailable") {
			t.Fatalf("err %v", err)
		}
	})
}

// -o json spells minAge as the flag does, and a plan written by an
// earlier version (nanoseconds) still reads.
func TestPlanMinAgeJSON(t *testing.T) {
	b, err := json.Marshal(Plan{MinAge: DefaultMinAge, Repository: "repo"})
	if err != nil || !strings.Contains(string(b), `"minAge":"168h0m0s"`) || !strings.Contains(string(b), `"repository":"repo"`) {
		t.Fatalf("%s %v", b, err)
	}
	for _, raw := range []string{`{"minAge":"168h0m0s","repository":"repo"}`, `{"minAge":604800000000000,"repository":"repo"}`} {
		var p Plan
		if err := json.Unmarshal([]byte(raw), &p); err != nil || p.MinAge != DefaultMinAge || p.Repository != "repo" {
			t.Fatalf("%s: %+v %v", raw, p.MinAge, err)
		}
	}
	var p Plan
	if err := json.Unmarshal([]byte(`{"minAge":"7d"}`), &p); err == nil || !strings.Contains(err.Error(), "minAge") {
		t.Fatalf("a bad duration: %v", err)
	}
}
