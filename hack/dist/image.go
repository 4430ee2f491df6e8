package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/snapflow/snapflow/internal/image"
)

// imageResult is what an image build leaves behind.
type imageResult struct {
	Version, Tag, Digest string
	// Binaries are the platforms' binaries, by "os/arch", and Tarballs
	// their loadable images.
	Binaries, Tarballs map[string]string
}

// runImage builds the binary per platform and writes, with
// internal/image, an OCI layout (oci/) and a loadable tarball per platform
// into -o, with the index digest and tag beside them.
func runImage(args []string) (*imageResult, error) {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	out := fs.String("o", "bin/image", "output directory")
	version := fs.String("version", "", "image version (default: the release version of the checkout)")
	repo := fs.String("repository", "snapflow/snapflow", "image repository the tarballs are tagged with")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	rev, err := git("rev-parse", "HEAD")
	if err != nil {
		return nil, err
	}
	if *version == "" {
		if *version, err = releaseVersion(chartVersion()); err != nil {
			return nil, err
		}
	}
	created, err := commitTime()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return nil, err
	}
	res := &imageResult{Version: *version, Binaries: map[string]string{}, Tarballs: map[string]string{}}
	o := image.Options{Version: *version, Revision: rev, Source: "https://github.com/snapflow/snapflow", Created: created}
	var order []string
	for _, p := range strings.Split(*platforms, ",") {
		goos, arch, err := platform(p)
		if err != nil {
			return nil, err
		}
		path, err := build(*out, goos, arch, *version, rev)
		if err != nil {
			return nil, err
		}
		bin, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		res.Binaries[goos+"/"+arch] = path
		order = append(order, goos+"/"+arch)
		o.Platforms = append(o.Platforms, image.Platform{OS: goos, Arch: arch, Binary: bin})
	}
	idx, err := image.Index(o)
	if err != nil {
		return nil, err
	}
	tag, err := name.NewTag(*repo + ":" + strings.ReplaceAll(*version, "+", "_"))
	if err != nil {
		return nil, fmt.Errorf("-repository and -version make no valid tag: %w", err)
	}
	dir := filepath.Join(*out, "oci")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag.TagStr()})); err != nil {
		return nil, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	manifests, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for i, p := range order {
		// The index holds each platform's image in the order given.
		img, err := idx.Image(manifests.Manifests[i].Digest)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(*out, "snapflow-"+strings.ReplaceAll(p, "/", "-")+".tar")
		if err := tarball.WriteToFile(path, tag, img); err != nil {
			return nil, err
		}
		res.Tarballs[p] = path
		d, _ := img.Digest()
		fmt.Printf("%s  %s (%s)\n", path, d, p)
	}
	res.Tag, res.Digest = tag.TagStr(), digest.String()
	for file, content := range map[string]string{"digest": res.Digest, "tag": res.Tag} {
		if err := os.WriteFile(filepath.Join(*out, file), []byte(content+"\n"), 0o644); err != nil {
			return nil, err
		}
	}
	fmt.Printf("%s  %s@%s\n", dir, tag.Name(), digest)
	fmt.Printf("install a loaded tarball with:   helm install ... --set image.tag=%s\n", res.Tag)
	fmt.Printf("push the layout with:            make image-push REGISTRY=<registry>\n")
	return res, nil
}
