// Package image assembles snapflow's container image from binaries already
// built, with no base image, no daemon and no registry: one layer holding
// the binary, the unprivileged account the pods run as and nothing else (no
// shell, no package manager). Every timestamp is the commit's and every
// entry is written in one order, so two builds of one commit give one
// digest.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Binary is where the snapflow binary lives in the image; PATH finds it as
// plain "snapflow", which is how mover Jobs call it.
const Binary = "/usr/local/bin/snapflow"

// User is the image's user: the UID and GID every snapflow pod runs as
// unless its securityContext says otherwise.
const User = "65532:65532"

// UID and GID are User's parts.
const (
	UID = 65532
	GID = 65532
)

// Env is the environment the image config gives every container.
var Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot"}

// Platform is one architecture's build of the binary.
type Platform struct {
	OS, Arch string
	Binary   []byte
}

// Options describe one image.
type Options struct {
	// Version and Revision are the build's version and commit; Source is the
	// repository's URL. They become the OCI annotations labels.
	Version, Revision, Source string
	// Created is the commit's time; every timestamp in the image is it.
	Created   time.Time
	Platforms []Platform
}

// file is one entry of the layer.
type file struct {
	path string
	mode int64
	uid  int
	dir  bool
	data []byte
}

const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
)

// files are the layer's entries, parents before children.
func files(binary []byte) []file {
	return []file{
		{path: "etc/", mode: 0o755, dir: true},
		{path: "etc/group", mode: 0o644, data: []byte(group)},
		{path: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{path: "home/", mode: 0o755, dir: true},
		{path: "home/nonroot/", mode: 0o700, uid: 65532, dir: true},
		// Writable scratch for tools that insist on one; movers run with a
		// read-only root and get their own emptyDir volumes.
		{path: "tmp/", mode: 0o1777, dir: true},
		{path: "usr/", mode: 0o755, dir: true},
		{path: "usr/local/", mode: 0o755, dir: true},
		{path: "usr/local/bin/", mode: 0o755, dir: true},
		{path: Binary[1:], mode: 0o755, data: binary},
	}
}

// WriteRoot writes the image's filesystem for binary into dir, as a
// container runtime unpacks the layer: the same entries, modes and owners
// (owners only when the caller may set them). A local container runtime
// runs it as the image's root.
func WriteRoot(dir string, binary []byte) error {
	asRoot := os.Geteuid() == 0
	// The root itself, whatever the umask: every user must pass it.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files(binary) {
		p := filepath.Join(dir, filepath.FromSlash(f.path))
		var err error
		if f.dir {
			err = os.MkdirAll(p, 0o755)
		} else {
			err = os.WriteFile(p, f.data, 0o644)
		}
		if err == nil {
			err = os.Chmod(p, os.FileMode(f.mode&0o777)|sticky(f.mode))
		}
		if err == nil && asRoot {
			err = os.Lchown(p, f.uid, f.uid)
		}
		if err != nil {
			return fmt.Errorf("write the image's %s: %w", f.path, err)
		}
	}
	return nil
}

func sticky(mode int64) os.FileMode {
	if mode&0o1000 != 0 {
		return os.ModeSticky
	}
	return 0
}

// layerTar writes the entries as a tar stream with fixed owners and times.
func layerTar(entries []file, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range entries {
		h := &tar.Header{Name: f.path, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: mtime, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Image is the image of one platform.
func Image(o Options, p Platform) (v1.Image, error) {
	if len(p.Binary) == 0 {
		return nil, fmt.Errorf("no binary for %s/%s", p.OS, p.Arch)
	}
	raw, err := layerTar(files(p.Binary), o.Created)
	if err != nil {
		return nil, fmt.Errorf("write the layer: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: "snapflow make image"}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = p.OS, p.Arch
	cfg.Created = v1.Time{Time: o.Created}
	cfg.Config = v1.Config{
		Entrypoint: []string{Binary},
		Env:        slices.Clone(Env),
		User:       User,
		WorkingDir: "/",
		Labels:     Labels(o),
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, Labels(o)).(v1.Image), nil
}

// Labels are the OCI annotations the image and its index carry.
func Labels(o Options) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    "snapflow",
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.source":   o.Source,
		"org.opencontainers.image.created":  o.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
}

// Index is the multi-platform image: one manifest per platform, in the
// order given.
func Index(o Options) (v1.ImageIndex, error) {
	if len(o.Platforms) == 0 {
		return nil, fmt.Errorf("no platforms to build")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]bool{}
	for _, p := range o.Platforms {
		key := p.OS + "/" + p.Arch
		if seen[key] {
			return nil, fmt.Errorf("platform %s given twice", key)
		}
		seen[key] = true
		img, err := Image(o, p)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch}}})
	}
	return mutate.Annotations(idx, Labels(o)).(v1.ImageIndex), nil
}
