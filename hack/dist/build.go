package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// build cross-compiles a static, path-free binary for one platform into
// dir and returns its path.
func build(dir, goos, arch, version, rev string) (string, error) {
	path := filepath.Join(dir, "snapflow-"+goos+"-"+arch)
	ldflags := "-s -w -buildid= -X github.com/snapflow/snapflow/internal/version.Version=" + version +
		" -X github.com/snapflow/snapflow/internal/version.Commit=" + rev
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", path, "./cmd/snapflow")
	// Everything that changes the output is set here, not inherited.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+arch, "GOFLAGS=-mod=readonly", "GOAMD64=v1", "GOARM64=v8.0", "GOEXPERIMENT=")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s/%s: %w", goos, arch, err)
	}
	fmt.Printf("built %s/%s in %s\n", goos, arch, time.Since(start).Round(time.Second))
	return path, nil
}

// platform splits "os/arch".
func platform(p string) (goos, arch string, err error) {
	goos, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
	if !ok || goos == "" || arch == "" {
		return "", "", fmt.Errorf("-platforms: %q is not os/arch", p)
	}
	return goos, arch, nil
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

// describeRE is `git describe --tags --long --dirty --match 'v[0-9]*'`.
var describeRE = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+?)?-(\d+)-g([0-9a-f]+)(-dirty)?$`)

// semver turns git's description of the commit into the release's
// semantic version: a tag exactly (v1.2.0 -> 1.2.0); after a tag, a
// pre-release of the next patch that sorts after the tag
// (1.2.1-dev.3+g1a2b3c4); before any tag, a pre-release of the chart's
// version counting every commit (0.1.0-dev.42+g1a2b3c4). A dirty tree says so in the build
// metadata, so it is never mistaken for the commit.
func semver(describe, commit, chartVersion string, commits int) string {
	m := describeRE.FindStringSubmatch(describe)
	dirty := strings.HasSuffix(describe, "-dirty")
	meta := func() string {
		s := "+g" + commit
		if dirty {
			s += ".dirty"
		}
		return s
	}
	if m == nil {
		// No tag yet: commits counted from the start, so builds sort.
		return chartVersion + "-dev." + strconv.Itoa(commits) + meta()
	}
	if m[5] == "0" && !dirty {
		return m[1] + "." + m[2] + "." + m[3] + m[4]
	}
	if m[4] != "" {
		// After a pre-release tag: a later pre-release of the same version.
		return m[1] + "." + m[2] + "." + m[3] + m[4] + ".dev." + m[5] + meta()
	}
	patch, _ := strconv.Atoi(m[3])
	return fmt.Sprintf("%s.%s.%d-dev.%s%s", m[1], m[2], patch+1, m[5], meta())
}

// releaseVersion is the checkout's semantic version.
func releaseVersion(chartVersion string) (string, error) {
	commit, err := git("rev-parse", "--short=7", "HEAD")
	if err != nil {
		return "", err
	}
	describe, _ := git("describe", "--tags", "--long", "--dirty", "--match", "v[0-9]*")
	if describe == "" {
		if st, _ := git("status", "--porcelain", "--untracked-files=no"); st != "" {
			describe = "-dirty"
		}
	}
	commits := 0
	if n, err := git("rev-list", "--count", "HEAD"); err == nil {
		commits, _ = strconv.Atoi(n)
	}
	return semver(describe, commit, chartVersion, commits), nil
}
