package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// The krew plugin manifest (krew.googlecontainertools.github.com/v1alpha2
// Plugin). krew's own module pins client-go v11, which this module's
// Kubernetes libraries cannot live beside, so checkKrew applies krew's
// documented rules itself.
type krewPlugin struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   krewMeta `json:"metadata"`
	Spec       krewSpec `json:"spec"`
}

type krewMeta struct {
	Name string `json:"name"`
}

type krewSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description"`
	Caveats          string         `json:"caveats,omitempty"`
	Platforms        []krewPlatform `json:"platforms"`
}

type krewPlatform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string     `json:"uri"`
	SHA256 string     `json:"sha256"`
	Bin    string     `json:"bin"`
	Files  []krewFile `json:"files"`
}

type krewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// krewManifest describes `kubectl snapflow` for the archives in dir, by
// platform.
func krewManifest(version, dir string, archives map[string]string) (krewPlugin, error) {
	p := krewPlugin{APIVersion: "krew.googlecontainertools.github.com/v1alpha2", Kind: "Plugin", Metadata: krewMeta{Name: "snapflow"},
		Spec: krewSpec{
			Version:          "v" + version,
			Homepage:         "https://github.com/snapflow/snapflow",
			ShortDescription: "Back up and restore volumes with snapflow (kopia)",
			Description: "Operate snapflow, event-driven kopia backups for Kubernetes: take a backup now,\n" +
				"restore, describe snapshots, preview retention, list a schedule's next runs,\n" +
				"run repository maintenance and plan orphan pruning.\n",
			Caveats: "The cluster needs snapflow installed (its Helm chart) for backups to run.\n",
		}}
	keys := make([]string, 0, len(archives))
	for k := range archives {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		goos, arch, _ := strings.Cut(k, "/")
		sum, err := sha256File(filepath.Join(dir, archives[k]))
		if err != nil {
			return p, err
		}
		pl := krewPlatform{URI: fmt.Sprintf("%s/v%s/%s", releaseURL, version, archives[k]), SHA256: sum, Bin: "snapflow",
			Files: []krewFile{{From: "snapflow", To: "."}, {From: "LICENSE", To: "."}}}
		pl.Selector.MatchLabels = map[string]string{"os": goos, "arch": arch}
		p.Spec.Platforms = append(p.Spec.Platforms, pl)
	}
	return p, nil
}

var (
	krewName   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*[a-z0-9]$`)
	krewSemver = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)
	krewSHA    = regexp.MustCompile(`^[0-9a-f]{64}$`)
	krewOSes   = map[string]bool{"linux": true, "darwin": true, "windows": true}
)

// checkKrew applies the rules krew checks a plugin manifest against (its
// kind, a name of lowercase words, a v-prefixed semantic version, a short
// description, and per platform a URI, a sha256, a selector and a bin
// among the files copied), plus ours: https only, and no two platforms for
// one os/arch.
func checkKrew(p krewPlugin) error {
	switch {
	case p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin":
		return fmt.Errorf("apiVersion/kind %s/%s, want krew.googlecontainertools.github.com/v1alpha2 Plugin", p.APIVersion, p.Kind)
	case !krewName.MatchString(p.Metadata.Name):
		return fmt.Errorf("metadata.name %q: lowercase letters, digits and dashes", p.Metadata.Name)
	case !krewSemver.MatchString(p.Spec.Version):
		return fmt.Errorf("spec.version %q is not a v-prefixed semantic version", p.Spec.Version)
	case p.Spec.ShortDescription == "":
		return fmt.Errorf("spec.shortDescription is required")
	case len(p.Spec.Platforms) == 0:
		return fmt.Errorf("spec.platforms is empty")
	}
	seen := map[string]bool{}
	for i, pl := range p.Spec.Platforms {
		at := fmt.Sprintf("spec.platforms[%d]", i)
		os, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		if !krewOSes[os] || arch == "" {
			return fmt.Errorf("%s.selector: matchLabels os (linux, darwin, windows) and arch are required, got %v", at, pl.Selector.MatchLabels)
		}
		if seen[os+"/"+arch] {
			return fmt.Errorf("%s: a second platform for %s/%s", at, os, arch)
		}
		seen[os+"/"+arch] = true
		if !strings.HasPrefix(pl.URI, "https://") {
			return fmt.Errorf("%s.uri %q must be https", at, pl.URI)
		}
		if !krewSHA.MatchString(pl.SHA256) {
			return fmt.Errorf("%s.sha256 %q is not 64 lowercase hex digits", at, pl.SHA256)
		}
		copied := false
		for _, f := range pl.Files {
			if f.From == "" || f.To == "" || strings.Contains(f.To, "..") {
				return fmt.Errorf("%s.files: from and to are required and to stays inside the plugin's directory (%+v)", at, f)
			}
			copied = copied || f.From == pl.Bin || f.From == "*"
		}
		if pl.Bin == "" || strings.Contains(pl.Bin, "..") || !copied {
			return fmt.Errorf("%s.bin %q must name a file the platform copies", at, pl.Bin)
		}
	}
	return nil
}
