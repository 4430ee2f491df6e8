// Command dist builds what snapflow ships, with no daemon, no base image
// and no registry needed (make image, make release, make image-push):
//
//	dist image   -o bin/image          the container image: an OCI layout and a loadable tarball per platform
//	dist release -o bin/release        CLI archives, checksums, image tarballs, the chart, a krew manifest, an SBOM, release notes
//	dist push    -registry REGISTRY    the OCI layout's index to a registry, under its tag
//
// The commit fixes every timestamp, so two builds of one commit give the
// same image digest, CLI archives and SBOM (with the same Go toolchain);
// helm stamps the chart package with the time it runs.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dist image|release|push [flags]")
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "image":
		_, err = runImage(args)
	case "release":
		err = runRelease(args)
	case "push":
		err = runPush(args)
	default:
		err = fmt.Errorf("unknown command %q: want image, release or push", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		os.Exit(1)
	}
}
