package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/yaml"
)

// releaseURL is where a release's files are downloaded from; the krew
// manifest names them there.
const releaseURL = "https://github.com/snapflow/snapflow/releases/download"

// runRelease writes a release into -o: CLI archives per platform, the
// image tarballs, the chart packaged with the image's digest pinned, a
// krew manifest, an SBOM, release notes and a checksum list. It checks
// what it wrote before it returns.
func runRelease(args []string) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	out := fs.String("o", "bin/release", "output directory (emptied first)")
	cliPlatforms := fs.String("platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64", "CLI archives to build, os/arch")
	imagePlatforms := fs.String("image-platforms", "linux/amd64,linux/arm64", "image platforms, os/arch")
	helm := fs.String("helm", "bin/helm", "helm binary, to package and render the chart")
	repo := fs.String("repository", "snapflow/snapflow", "image repository")
	if err := fs.Parse(args); err != nil {
		return err
	}
	version, err := releaseVersion(chartVersion())
	if err != nil {
		return err
	}
	created, err := commitTime()
	if err != nil {
		return err
	}
	rev, err := git("rev-parse", "HEAD")
	if err != nil {
		return err
	}
	if err := os.RemoveAll(*out); err != nil {
		return err
	}
	work := filepath.Join(*out, ".work")
	img, err := runImage([]string{"-o", work, "-version", version, "-repository", *repo, "-platforms", *imagePlatforms})
	if err != nil {
		return err
	}
	for p, tarball := range img.Tarballs {
		if err := copyFile(tarball, filepath.Join(*out, "snapflow-image_"+fileVersion(version)+"_"+strings.ReplaceAll(p, "/", "_")+".tar")); err != nil {
			return err
		}
	}

	// CLI archives: the image's binaries where the platform is the same.
	license, err := os.ReadFile("LICENSE")
	if err != nil {
		return fmt.Errorf("a release carries the LICENSE: %w", err)
	}
	archives := map[string]string{}
	for _, p := range strings.Split(*cliPlatforms, ",") {
		goos, arch, err := platform(p)
		if err != nil {
			return err
		}
		bin, ok := img.Binaries[goos+"/"+arch]
		if !ok {
			if bin, err = build(work, goos, arch, version, rev); err != nil {
				return err
			}
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("snapflow_%s_%s_%s.tar.gz", fileVersion(version), goos, arch)
		tgz, err := archive(created, []archiveFile{{"snapflow", 0o755, data}, {"LICENSE", 0o644, license}})
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*out, name), tgz, 0o644); err != nil {
			return err
		}
		archives[goos+"/"+arch] = name
	}

	chart, err := packageChart(*helm, work, *out, version, *repo, img.Digest)
	if err != nil {
		return err
	}
	if err := checkChartPinned(*helm, filepath.Join(*out, chart), *repo, fileVersion(version), img.Digest); err != nil {
		return err
	}

	plugin, err := krewManifest(version, *out, archives)
	if err != nil {
		return err
	}
	if err := checkKrew(plugin); err != nil {
		return fmt.Errorf("krew manifest: %w", err)
	}
	krew, err := yaml.Marshal(plugin)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "snapflow.krew.yaml"), krew, 0o644); err != nil {
		return err
	}

	sbom, err := writeSBOM(img.Binaries[firstKey(img.Binaries)], version, created)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "snapflow.cdx.json"), sbom, 0o644); err != nil {
		return err
	}

	changelog, err := os.ReadFile("CHANGELOG.md")
	if err != nil {
		return err
	}
	notes, err := releaseNotes(string(changelog), version, *repo+":"+img.Tag, img.Digest, chart)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "RELEASE_NOTES.md"), []byte(notes), 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	sums, err := checksums(*out)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "checksums.txt"), sums, 0o644); err != nil {
		return err
	}
	fmt.Printf("release %s in %s (image %s@%s)\n", version, *out, *repo, img.Digest)
	return nil
}

// fileVersion is the version as it may appear in a file name (helm and
// OCI tags turn + into _ as well).
func fileVersion(v string) string { return strings.ReplaceAll(v, "+", "_") }

// chartVersion is charts/snapflow's version, the base of pre-releases
// before the first tag.
func chartVersion() string {
	b, err := os.ReadFile(filepath.Join("charts", "snapflow", "Chart.yaml"))
	if err != nil {
		return "0.0.0"
	}
	var c struct{ Version string }
	if yaml.Unmarshal(b, &c) != nil || c.Version == "" {
		return "0.0.0"
	}
	return c.Version
}

// packageChart copies the chart, pins the image repository and digest in
// its values and sets version and appVersion (the image tag, so the
// default tag is this release's), then packages it with helm into out. It
// returns the package's name.
func packageChart(helm, work, out, version, repo, digest string) (string, error) {
	dir := filepath.Join(work, "chart", "snapflow")
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	if b, err := exec.Command("cp", "-R", filepath.Join("charts", "snapflow"), filepath.Dir(dir)+"/").CombinedOutput(); err != nil {
		return "", fmt.Errorf("copy the chart: %v: %s", err, b)
	}
	values := filepath.Join(dir, "values.yaml")
	b, err := os.ReadFile(values)
	if err != nil {
		return "", err
	}
	pinned, err := pinImage(string(b), repo, digest)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(values, []byte(pinned), 0o644); err != nil {
		return "", err
	}
	// appVersion becomes a label value and the default image tag, neither
	// of which may hold the + of build metadata: the image's tag spells it _.
	cmd := exec.Command(helm, "package", dir, "--version", version, "--app-version", fileVersion(version), "-d", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("helm package: %v: %s", err, b)
	}
	return "snapflow-" + version + ".tgz", nil // helm keeps the + of build metadata
}

var imageKey = regexp.MustCompile(`(?m)^image:$`)

// digestLine and repositoryLine are image's own lines of the chart's
// values (two spaces in; the mover's image is deeper).
var (
	digestLine     = regexp.MustCompile(`(?m)^  digest: ""$`)
	repositoryLine = regexp.MustCompile(`(?m)^  repository: \S+$`)
)

// pinImage sets image.repository and image.digest, the first such lines
// after image: in the values; the mover's own image keeps none.
func pinImage(values, repo, digest string) (string, error) {
	at := imageKey.FindStringIndex(values)
	if at == nil {
		return "", fmt.Errorf("charts/snapflow/values.yaml has no image: section to pin")
	}
	head, rest := values[:at[1]], values[at[1]:]
	for _, r := range []struct {
		re   *regexp.Regexp
		line string
	}{{digestLine, `  digest: "` + digest + `"`}, {repositoryLine, "  repository: " + repo}} {
		loc := r.re.FindStringIndex(rest)
		if loc == nil {
			return "", fmt.Errorf("charts/snapflow/values.yaml has no %q line under image: to pin", strings.TrimSpace(r.re.String()))
		}
		rest = rest[:loc[0]] + r.line + rest[loc[1]:]
	}
	return head + rest, nil
}

// imageRef finds every reference to the snapflow image in rendered YAML:
// container images, SNAPFLOW_IMAGE values and --mover-image arguments.
var imageRef = regexp.MustCompile(`[^\s"'=]*snapflow[^\s"'=]*:[^\s"']+`)

// checkChartPinned renders the packaged chart (with and without Knative)
// and checks every snapflow image reference: repo, the release's tag, and
// the digest, and a valid reference as a kubelet parses it.
func checkChartPinned(helm, chart, repo, tag, digest string) error {
	want := repo + ":" + tag + "@" + digest
	for _, extra := range [][]string{nil, {"--set", "knative.enabled=true"}} {
		args := append([]string{"template", "snapflow", chart, "--namespace", "snapflow-system"}, extra...)
		out, err := exec.Command(helm, args...).Output()
		if err != nil {
			return fmt.Errorf("helm template %s %v: %w", chart, extra, err)
		}
		n := 0
		for _, ref := range imageRef.FindAllString(string(out), -1) {
			if !strings.Contains(ref, "@sha256:") && !strings.HasPrefix(ref, repo+":") {
				continue // not an image (a label, a URL)
			}
			if ref != want {
				return fmt.Errorf("the packaged chart renders image %q, want %q", ref, want)
			}
			if _, err := name.ParseReference(ref); err != nil {
				return fmt.Errorf("the packaged chart renders an invalid image reference %q: %w", ref, err)
			}
			n++
		}
		if n == 0 {
			return fmt.Errorf("the packaged chart renders no snapflow image (%v)", extra)
		}
	}
	return nil
}

// checksums lists every file of dir with its sha256, as sha256sum -c reads.
func checksums(dir string) ([]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for _, e := range entries {
		if e.IsDir() || e.Name() == "checksums.txt" {
			continue
		}
		sum, err := sha256File(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&buf, "%s  %s\n", sum, e.Name())
	}
	return buf.Bytes(), nil
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

func firstKey(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}
