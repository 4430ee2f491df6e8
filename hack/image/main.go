// Command image builds snapflow's container image (make image): it
// cross-compiles a static binary per platform and writes them, with
// internal/image, as an OCI image layout and a loadable tarball per
// platform under bin/image. No daemon, no base image and no registry are
// needed; the commit fixes every timestamp, so two builds of one commit give
// one digest.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/snapflow/snapflow/internal/image"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("o", "bin/image", "output directory")
	version := flag.String("version", "", "image version (default: git describe)")
	repo := flag.String("repository", "snapflow/snapflow", "image repository the tarballs are tagged with")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	flag.Parse()

	rev, err := git("rev-parse", "HEAD")
	if err != nil {
		return err
	}
	if *version == "" {
		if *version, err = git("describe", "--tags", "--always", "--dirty"); err != nil {
			return err
		}
	}
	created, err := commitTime()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	o := image.Options{Version: *version, Revision: rev, Source: "https://github.com/snapflow/snapflow", Created: created}
	for _, p := range strings.Split(*platforms, ",") {
		goos, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok {
			return fmt.Errorf("-platforms: %q is not os/arch", p)
		}
		start := time.Now()
		bin, err := build(*out, goos, arch, *version, rev)
		if err != nil {
			return err
		}
		fmt.Printf("built %s/%s in %s\n", goos, arch, time.Since(start).Round(time.Second))
		o.Platforms = append(o.Platforms, image.Platform{OS: goos, Arch: arch, Binary: bin})
	}
	idx, err := image.Index(o)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(*repo + ":" + strings.ReplaceAll(*version, "+", "_"))
	if err != nil {
		return fmt.Errorf("-repository and -version make no valid tag: %w", err)
	}
	dir := filepath.Join(*out, "oci")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag.TagStr()})); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	manifests, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for i, p := range o.Platforms {
		// The index holds each platform's image in the order given.
		img, err := idx.Image(manifests.Manifests[i].Digest)
		if err != nil {
			return err
		}
		path := filepath.Join(*out, fmt.Sprintf("snapflow-%s-%s.tar", p.OS, p.Arch))
		if err := tarball.WriteToFile(path, tag, img); err != nil {
			return err
		}
		d, _ := img.Digest()
		fmt.Printf("%s  %s (%s/%s)\n", path, d, p.OS, p.Arch)
	}
	for file, content := range map[string]string{"digest": digest.String(), "tag": tag.TagStr()} {
		if err := os.WriteFile(filepath.Join(*out, file), []byte(content+"\n"), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("%s  %s@%s\n", dir, tag.Name(), digest)
	fmt.Printf("install a loaded tarball with:   helm install ... --set image.tag=%s\n", tag.TagStr())
	fmt.Printf("install the pushed layout with:  helm install ... --set image.repository=<registry>/snapflow --set image.tag=%s --set image.digest=%s\n", tag.TagStr(), digest)
	return nil
}

// build cross-compiles a static, path-free binary for one platform.
func build(out, goos, arch, version, rev string) ([]byte, error) {
	path := filepath.Join(out, "snapflow-"+goos+"-"+arch)
	ldflags := "-s -w -buildid= -X github.com/snapflow/snapflow/internal/version.Version=" + version +
		" -X github.com/snapflow/snapflow/internal/version.Commit=" + rev
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", path, "./cmd/snapflow")
	// Everything that changes the output is set here, not inherited.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+arch, "GOFLAGS=-mod=readonly", "GOAMD64=v1", "GOARM64=v8.0", "GOEXPERIMENT=")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("build %s/%s: %w", goos, arch, err)
	}
	return os.ReadFile(path)
}

// commitTime is SOURCE_DATE_EPOCH when set, else the commit's time.
func commitTime() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		var err error
		if s, err = git("log", "-1", "--format=%ct"); err != nil {
			return time.Time{}, err
		}
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("commit time %q: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func git(args ...string) (string, error) {
	b, err := exec.Command("git", args...).Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(b)), nil
}
