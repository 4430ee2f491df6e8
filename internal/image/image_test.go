package image

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func options() Options {
	return Options{Version: "v0.3.0", Revision: "0123abc", Source: "https://github.com/snapflow/snapflow",
		Created:   time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC),
		Platforms: []Platform{{OS: "linux", Arch: "amd64", Binary: []byte("amd64 binary")}, {OS: "linux", Arch: "arm64", Binary: []byte("arm64 binary")}}}
}

func digest(t *testing.T, o Options) v1.Hash {
	t.Helper()
	idx, err := Index(o)
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Two builds of one commit give one digest; any input that differs gives
// another.
func TestReproducible(t *testing.T) {
	first := digest(t, options())
	if again := digest(t, options()); again != first {
		t.Fatalf("two builds of the same inputs: %s and %s", first, again)
	}
	for name, edit := range map[string]func(*Options){
		"version":  func(o *Options) { o.Version = "v0.3.1" },
		"revision": func(o *Options) { o.Revision = "fff" },
		"time":     func(o *Options) { o.Created = o.Created.Add(time.Second) },
		"binary":   func(o *Options) { o.Platforms[1].Binary = []byte("other") },
	} {
		o := options()
		o.Platforms = append([]Platform(nil), o.Platforms...)
		edit(&o)
		if digest(t, o) == first {
			t.Errorf("a different %s gave the same digest", name)
		}
	}
}

// Each platform's image holds the binary, the account and nothing else (no
// shell), runs as 65532 and says what it is.
func TestContents(t *testing.T) {
	o := options()
	idx, err := Index(o)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 2 || m.Annotations["org.opencontainers.image.revision"] != "0123abc" {
		t.Fatalf("index: %+v", m)
	}
	for i, desc := range m.Manifests {
		p := o.Platforms[i]
		if desc.Platform == nil || desc.Platform.OS != p.OS || desc.Platform.Architecture != p.Arch {
			t.Fatalf("manifest %d platform %+v, want %s/%s", i, desc.Platform, p.OS, p.Arch)
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Architecture != p.Arch || cfg.Config.User != "65532:65532" || strings.Join(cfg.Config.Entrypoint, " ") != Binary ||
			cfg.Config.Labels["org.opencontainers.image.version"] != "v0.3.0" || !cfg.Created.Equal(o.Created) {
			t.Errorf("config of %s: %+v", p.Arch, cfg)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("layers %d, %v", len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		var owners []string
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(tr)
			got["/"+h.Name] = string(b)
			if !h.ModTime.Equal(o.Created) {
				t.Errorf("%s has time %s", h.Name, h.ModTime)
			}
			if h.Uid != 0 {
				owners = append(owners, h.Name)
			}
		}
		rc.Close()
		want := []string{"/etc/", "/etc/group", "/etc/passwd", "/home/", "/home/nonroot/", "/tmp/", "/usr/", "/usr/local/", "/usr/local/bin/", Binary}
		if len(got) != len(want) {
			t.Errorf("%s holds %d entries, want exactly %v: %v", p.Arch, len(got), want, got)
		}
		for _, w := range want {
			if _, ok := got[w]; !ok {
				t.Errorf("%s misses %s", p.Arch, w)
			}
		}
		if got[Binary] != string(p.Binary) {
			t.Errorf("%s binary is %q", p.Arch, got[Binary])
		}
		if !strings.Contains(got["/etc/passwd"], ":65532:65532:") || strings.Contains(got["/etc/passwd"], "/bin/sh") {
			t.Errorf("passwd: %q", got["/etc/passwd"])
		}
		if strings.Join(owners, ",") != "home/nonroot/" {
			t.Errorf("entries not owned by root: %v, want only the home of 65532", owners)
		}
	}
}

func TestRefusesBadPlatforms(t *testing.T) {
	o := options()
	o.Platforms = nil
	if _, err := Index(o); err == nil {
		t.Error("no platforms built an index")
	}
	o.Platforms = []Platform{{OS: "linux", Arch: "amd64", Binary: []byte("x")}, {OS: "linux", Arch: "amd64", Binary: []byte("y")}}
	if _, err := Index(o); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a platform twice: %v", err)
	}
	o.Platforms = []Platform{{OS: "linux", Arch: "amd64"}}
	if _, err := Index(o); err == nil || !strings.Contains(err.Error(), "no binary") {
		t.Errorf("no binary: %v", err)
	}
}

// The root a local runtime runs holds what the layer holds, with its modes.
func TestWriteRoot(t *testing.T) {
	dir := t.TempDir()
	if err := WriteRoot(dir, []byte("the binary")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, Binary))
	if err != nil || string(b) != "the binary" {
		t.Fatalf("binary %q, %v", b, err)
	}
	for path, want := range map[string]os.FileMode{Binary: 0o755, "/etc/passwd": 0o644, "/home/nonroot": 0o700 | os.ModeDir, "/tmp": 0o777 | os.ModeDir | os.ModeSticky} {
		fi, err := os.Stat(filepath.Join(dir, path))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bin", "sh")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the root has a shell: %v", err)
	}
}
