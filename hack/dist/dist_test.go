package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/snapflow/snapflow/internal/image"
)

func TestSemver(t *testing.T) {
	for _, c := range []struct{ describe, want string }{
		{"v1.2.0-0-g1a2b3c4", "1.2.0"},
		{"v1.2.0-0-g1a2b3c4-dirty", "1.2.1-dev.0+g1a2b3c4.dirty"},
		{"v1.2.0-3-g1a2b3c4", "1.2.1-dev.3+g1a2b3c4"},
		{"v2.0.0-rc.1-0-g1a2b3c4", "2.0.0-rc.1"},
		{"v2.0.0-rc.1-4-g1a2b3c4", "2.0.0-rc.1.dev.4+g1a2b3c4"},
		{"", "0.1.0-dev.42+g1a2b3c4"},
		{"-dirty", "0.1.0-dev.42+g1a2b3c4.dirty"},
		{"not-a-version-tag", "0.1.0-dev.42+g1a2b3c4"},
	} {
		got := semver(c.describe, "1a2b3c4", "0.1.0", 42)
		if got != c.want {
			t.Errorf("semver(%q) = %q, want %q", c.describe, got, c.want)
		}
		if !krewSemver.MatchString("v" + got) {
			t.Errorf("semver(%q) = %q is no semantic version", c.describe, got)
		}
	}
}

// One commit gives the same archive bytes; the archive holds the files,
// modes and time given.
func TestArchiveIsReproducible(t *testing.T) {
	at := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	files := []archiveFile{{"snapflow", 0o755, []byte("binary")}, {"LICENSE", 0o644, []byte("license")}}
	a, err := archive(at, files)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := archive(at, files)
	if !bytes.Equal(a, b) {
		t.Fatal("two archives of the same files differ")
	}
	gz, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for _, want := range files {
		h, err := tr.Next()
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		if h.Name != want.name || h.Mode != want.mode || !h.ModTime.Equal(at) || string(data) != string(want.data) || h.Uid != 0 {
			t.Errorf("entry %s mode %o time %s uid %d %q", h.Name, h.Mode, h.ModTime, h.Uid, data)
		}
	}
}

func TestKrewManifest(t *testing.T) {
	dir := t.TempDir()
	archives := map[string]string{}
	for _, p := range []string{"linux/amd64", "darwin/arm64"} {
		n := "snapflow_1.2.0_" + strings.ReplaceAll(p, "/", "_") + ".tar.gz"
		if err := os.WriteFile(filepath.Join(dir, n), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
		archives[p] = n
	}
	p, err := krewManifest("1.2.0", dir, archives)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkKrew(p); err != nil {
		t.Fatalf("the manifest is refused: %v", err)
	}
	if got := p.Spec.Platforms[1].URI; got != releaseURL+"/v1.2.0/snapflow_1.2.0_linux_amd64.tar.gz" {
		t.Errorf("linux/amd64 uri %s", got)
	}
	if sum, _ := sha256File(filepath.Join(dir, archives["linux/amd64"])); p.Spec.Platforms[1].SHA256 != sum {
		t.Errorf("linux/amd64 sha256 %s, the archive's is %s", p.Spec.Platforms[1].SHA256, sum)
	}
	for name, c := range map[string]struct {
		edit func(*krewPlugin)
		want string
	}{
		"no v":             {func(p *krewPlugin) { p.Spec.Version = "1.2.0" }, "spec.version"},
		"http":             {func(p *krewPlugin) { p.Spec.Platforms[0].URI = "http://example.com/a.tar.gz" }, "must be https"},
		"short sum":        {func(p *krewPlugin) { p.Spec.Platforms[0].SHA256 = "abc" }, "sha256"},
		"bin not copied":   {func(p *krewPlugin) { p.Spec.Platforms[0].Bin = "kubectl-snapflow" }, "must name a file"},
		"two for one":      {func(p *krewPlugin) { p.Spec.Platforms[1].Selector = p.Spec.Platforms[0].Selector }, "a second platform"},
		"no os":            {func(p *krewPlugin) { p.Spec.Platforms[0].Selector.MatchLabels = map[string]string{"arch": "amd64"} }, "selector"},
		"upper-case name":  {func(p *krewPlugin) { p.Metadata.Name = "Snapflow" }, "metadata.name"},
		"escaping file to": {func(p *krewPlugin) { p.Spec.Platforms[0].Files[0].To = "../.." }, "inside"},
	} {
		bad, _ := krewManifest("1.2.0", dir, archives)
		c.edit(&bad)
		if err := checkKrew(bad); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, c.want)
		}
	}
}

func TestReleaseNotes(t *testing.T) {
	changelog := "# Changelog\n\n## [Unreleased]\n\n### Added\n- next\n\n## [1.2.0] - 2026-12-01\n\n### Added\n- one\n\n## [1.1.0]\n- old\n"
	for _, c := range []struct{ version, want, not string }{
		{"1.2.0", "- one", "- old"},
		{"1.2.1-dev.3+g1a2b3c4", "- next", "- one"},
	} {
		notes, err := releaseNotes(changelog, c.version, "snapflow/snapflow:"+c.version, "sha256:00", "snapflow-1.2.0.tgz")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(notes, c.want) || strings.Contains(notes, c.not) || !strings.HasPrefix(notes, "# snapflow "+c.version) || !strings.Contains(notes, "@sha256:00") {
			t.Errorf("notes of %s:\n%s", c.version, notes)
		}
	}
	// Right after a release, a pre-release has nothing under Unreleased yet.
	if notes, err := releaseNotes("## [Unreleased]\n\n## [1.2.0]\n- one\n", "1.2.1-dev.1+gabc", "t", "d", "c"); err != nil || !strings.Contains(notes, "No changes recorded") {
		t.Errorf("an empty Unreleased section: %v\n%s", err, notes)
	}
	if _, err := releaseNotes(changelog, "1.3.0", "t", "d", "c"); err == nil || !strings.Contains(err.Error(), `"## [1.3.0]"`) {
		t.Errorf("a release with no section: %v", err)
	}
}

func TestPinImage(t *testing.T) {
	values := "image:\n  repository: snapflow/snapflow\n  digest: \"\"\nmover:\n  image:\n    repository: \"\"\n    digest: \"\"\n"
	got, err := pinImage(values, "ghcr.io/acme/snapflow", "sha256:ab")
	if err != nil {
		t.Fatal(err)
	}
	if want := "image:\n  repository: ghcr.io/acme/snapflow\n  digest: \"sha256:ab\"\nmover:\n  image:\n    repository: \"\"\n    digest: \"\"\n"; got != want {
		t.Errorf("pinned:\n%s", got)
	}
	if _, err := pinImage("image:\n  tag: x\n", "r", "sha256:ab"); err == nil {
		t.Error("values with no digest line were pinned")
	}
	chart, err := os.ReadFile(filepath.Join("..", "..", "charts", "snapflow", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pinImage(string(chart), "snapflow/snapflow", "sha256:ab"); err != nil {
		t.Errorf("the chart's own values: %v", err)
	}
}

// The layout `dist image` writes is pushed whole (every platform) to a
// registry under its tag, and what the registry serves has the digest the
// chart is pinned to.
func TestPushToARegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	o := image.Options{Version: "1.2.0", Revision: "abc", Created: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC),
		Platforms: []image.Platform{{OS: "linux", Arch: "amd64", Binary: []byte("a")}, {OS: "linux", Arch: "arm64", Binary: []byte("b")}}}
	idx, err := image.Index(o)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "oci")
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "1.2.0"})); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	ref, digest, err := push(dir, host+"/acme/snapflow", crane.GetOptions(crane.Insecure))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	if digest != want || ref.String() != host+"/acme/snapflow:1.2.0" {
		t.Fatalf("pushed %s@%s, want the index %s", ref, digest, want)
	}
	pref, err := name.ParseReference(host+"/acme/snapflow:1.2.0", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Index(pref)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := pulled.Digest(); d != want {
		t.Fatalf("the registry serves %s, want %s", d, want)
	}
	m, _ := pulled.IndexManifest()
	if len(m.Manifests) != 2 {
		t.Fatalf("the registry has %d platforms, want 2", len(m.Manifests))
	}
	if _, _, err := push(filepath.Join(t.TempDir(), "missing"), host+"/acme/snapflow", crane.GetOptions(crane.Insecure)); err == nil || !strings.Contains(err.Error(), "make image") {
		t.Errorf("a missing layout: %v", err)
	}
}

// The SBOM lists the modules linked into the binary, at their versions,
// and one binary gives one SBOM.
func TestSBOM(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	a, err := writeSBOM(self, "1.2.0", at)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := writeSBOM(self, "1.2.0", at)
	if !bytes.Equal(a, b) {
		t.Fatal("two SBOMs of one binary differ")
	}
	bom := cdx.NewBOM()
	if err := cdx.NewBOMDecoder(bytes.NewReader(a), cdx.BOMFileFormatJSON).Decode(bom); err != nil {
		t.Fatal(err)
	}
	if bom.Metadata.Component.Version != "1.2.0" || !strings.HasPrefix(bom.SerialNumber, "urn:uuid:") || bom.Components == nil {
		t.Fatalf("metadata %+v, serial %s", bom.Metadata.Component, bom.SerialNumber)
	}
	found := false
	for _, c := range *bom.Components {
		found = found || c.Name == "github.com/google/go-containerregistry" && strings.HasPrefix(c.PackageURL, "pkg:golang/github.com/google/go-containerregistry@v")
	}
	if !found {
		t.Error("the SBOM lacks go-containerregistry, which this binary links")
	}
}
