package main

import (
	"fmt"
	"strings"
)

// releaseNotes are the CHANGELOG's section for the version (## [X.Y.Z]),
// or its Unreleased section for a pre-release built between tags, with how
// to install what the release holds; image is repository:tag.
func releaseNotes(changelog, version, image, digest, chart string) (string, error) {
	base, _, _ := strings.Cut(version, "+")
	section := changelogSection(changelog, base)
	if section == "" && strings.Contains(base, "-") {
		section = changelogSection(changelog, "Unreleased")
	}
	if strings.TrimSpace(section) == "" {
		if !strings.Contains(base, "-") {
			return "", fmt.Errorf("CHANGELOG.md has no section \"## [%s]\": write the release's changes there first", base)
		}
		// A pre-release right after a release: nothing recorded yet.
		section = "No changes recorded since the last release."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# snapflow %s\n\n%s\n", version, strings.TrimSpace(section))
	fmt.Fprintf(&b, "\n## Install\n\n")
	fmt.Fprintf(&b, "- Image: `%s@%s` (`snapflow-image_*.tar` load with `docker load` or `ctr images import`; push the OCI layout with `make image-push REGISTRY=...`).\n", image, digest)
	fmt.Fprintf(&b, "- Chart: `helm install snapflow %s -n snapflow-system --create-namespace` (the image digest is pinned in its values).\n", chart)
	fmt.Fprintf(&b, "- CLI: `snapflow_%s_<os>_<arch>.tar.gz`, or `kubectl krew install --manifest=snapflow.krew.yaml` for `kubectl snapflow`.\n", fileVersion(version))
	fmt.Fprintf(&b, "- Verify: `sha256sum -c checksums.txt`; the SBOM is `snapflow.cdx.json` (CycloneDX).\n")
	return b.String(), nil
}

// changelogSection is the body under "## [name]" up to the next "## ".
func changelogSection(changelog, name string) string {
	head := "## [" + name + "]"
	var out []string
	in := false
	for _, line := range strings.Split(changelog, "\n") {
		if strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			in = strings.HasPrefix(line, head)
			continue
		}
		if in {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
