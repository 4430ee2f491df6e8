package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// runPush pushes the image index `dist image` wrote (an OCI layout) to
// REGISTRY/snapflow under its tag, with the credentials docker or crane
// logins left (crane's default keychain), and prints what to install.
func runPush(args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	registry := fs.String("registry", "", "registry (and path) to push to, e.g. ghcr.io/acme; the image goes to REGISTRY/snapflow")
	dir := fs.String("layout", "bin/image/oci", "the OCI layout `make image` wrote")
	insecure := fs.Bool("insecure", false, "allow plain http and unverified TLS, for a registry on this machine only")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *registry == "" {
		return fmt.Errorf("-registry is required: where to push, e.g. make image-push REGISTRY=ghcr.io/acme")
	}
	opts := []crane.Option{}
	if *insecure {
		// Plain http sends your registry login in clear: only to this machine.
		host, _, _ := strings.Cut(*registry, "/")
		if h := strings.Split(host, ":")[0]; h != "localhost" && h != "127.0.0.1" && !strings.HasPrefix(host, "[::1]") {
			return fmt.Errorf("-insecure is only for a registry on this machine (localhost, 127.0.0.1, [::1]), not %s", host)
		}
		opts = append(opts, crane.Insecure)
	}
	ref, digest, err := push(*dir, strings.TrimSuffix(*registry, "/")+"/snapflow", crane.GetOptions(opts...))
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s@%s\n", ref, digest)
	fmt.Printf("install it with: helm install snapflow charts/snapflow -n snapflow-system --create-namespace --set image.repository=%s --set image.tag=%s --set image.digest=%s\n",
		ref.Context().Name(), ref.Identifier(), digest)
	return nil
}

// push writes the layout's one image index to repo under the tag the
// layout names, and returns the reference and the pushed digest.
func push(dir, repo string, o crane.Options) (name.Tag, v1.Hash, error) {
	var tag name.Tag
	lp, err := layout.FromPath(dir)
	if err != nil {
		return tag, v1.Hash{}, fmt.Errorf("read %s (run make image first): %w", dir, err)
	}
	outer, err := lp.ImageIndex()
	if err != nil {
		return tag, v1.Hash{}, err
	}
	m, err := outer.IndexManifest()
	if err != nil {
		return tag, v1.Hash{}, err
	}
	if len(m.Manifests) != 1 {
		return tag, v1.Hash{}, fmt.Errorf("%s holds %d images; make image writes one index", filepath.Clean(dir), len(m.Manifests))
	}
	desc := m.Manifests[0]
	// make image names the index by its tag, as OCI layouts do.
	version := desc.Annotations["org.opencontainers.image.ref.name"]
	if version == "" {
		return tag, v1.Hash{}, fmt.Errorf("%s names no tag for its image (org.opencontainers.image.ref.name); run make image again", filepath.Clean(dir))
	}
	if tag, err = name.NewTag(repo+":"+version, o.Name...); err != nil {
		return tag, v1.Hash{}, fmt.Errorf("-registry: %w", err)
	}
	idx, err := outer.ImageIndex(desc.Digest)
	if err != nil {
		return tag, v1.Hash{}, err
	}
	if err := remote.WriteIndex(tag, idx, o.Remote...); err != nil {
		return tag, v1.Hash{}, fmt.Errorf("push %s: %w", tag, err)
	}
	return tag, desc.Digest, nil
}
