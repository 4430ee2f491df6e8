package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// The try-it bundle from the user guide, used exactly as the guide says:
// apply everything, then create the generateName Snapshot.
func TestTryItBundle(t *testing.T) {
	bundle := repoPath(t, "config", "samples", "tryit", "backups.yaml")
	const ns = "kopiur-tryit"

	// apply cannot track a server-named object: it refuses the Snapshot and
	// applies the rest.
	res := kubectl(t, nil, 1, "apply", "-f", bundle)
	if !strings.Contains(res.Stderr, "generate name") {
		t.Fatalf("apply should refuse only the generateName Snapshot, stderr:\n%s", res.Stderr)
	}
	for _, obj := range []string{
		"persistentvolumeclaim/kopia-repo", "persistentvolumeclaim/app-data", "secret/kopia-password",
		"job.batch/seed-data", "repository.kopiur.home-operations.com/primary", "snapshotpolicy.kopiur.home-operations.com/app-data",
	} {
		if !strings.Contains(res.Stdout, obj+" created") {
			t.Errorf("apply did not create %s; stdout:\n%s", obj, res.Stdout)
		}
		kubectl(t, nil, 0, "-n", ns, "get", obj)
	}
	if out := kubectl(t, nil, 0, "-n", ns, "get", "snapshots", "-o", "name").Stdout; strings.TrimSpace(out) != "" {
		t.Fatalf("apply must not create a Snapshot, found:\n%s", out)
	}

	// The seed Job writes the data first, as the guide's readers wait for it.
	kubectl(t, nil, 0, "-n", ns, "wait", "--for=condition=complete", "--timeout=60s", "job/seed-data")

	// create mints the Snapshot; everything else already exists.
	created := regexp.MustCompile(`snapshot\.kopiur\.home-operations\.com/(app-data-manual-[a-z0-9]{5}) created`)
	res = kubectl(t, nil, 1, "create", "-f", bundle)
	m := created.FindStringSubmatch(res.Stdout)
	if m == nil {
		t.Fatalf("create did not mint a Snapshot; stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	}
	first := m[1]
	if !strings.Contains(res.Stderr, "AlreadyExists") {
		t.Errorf("create should report the applied objects as existing; stderr:\n%s", res.Stderr)
	}

	// The backup runs for real: repository bootstrap, VolumeSnapshot staging,
	// the mover Job running snapflow mover with the kopia library.
	s1 := waitSnapshot(t, ns, first, snapv1.SnapshotSucceeded)
	st := s1.Status.Stats
	if st == nil || *st.FilesNew != 20 || *st.BytesNew <= 0 || s1.Status.Snapshot == nil || s1.Status.Snapshot.KopiaSnapshotID == "" {
		t.Fatalf("first backup status = %+v, want 20 new files, bytes uploaded and a kopia snapshot id", s1.Status)
	}
	if id := s1.Status.Snapshot.Identity; id == nil || id.Username != "app-data" || id.Hostname != ns || id.SourcePath != "/pvc/app-data" {
		t.Fatalf("identity = %+v, want app-data@%s:/pvc/app-data", id, ns)
	}
	appData := env.Functions.Node.PVCDir(ns, "app-data")
	repoDir := filepath.Join(env.Functions.Node.PVCDir(ns, "kopia-repo"), "repository")
	sameAsSource(t, repoDir, "REPLACE_ME", s1.Status.Snapshot.KopiaSnapshotID, appData)

	// Each create mints a fresh name; unchanged data uploads next to nothing.
	res = kubectl(t, nil, 1, "create", "-f", bundle)
	m = created.FindStringSubmatch(res.Stdout)
	if m == nil || m[1] == first {
		t.Fatalf("second create should mint a new Snapshot, got %v; stdout:\n%s", m, res.Stdout)
	}
	s2 := waitSnapshot(t, ns, m[1], snapv1.SnapshotSucceeded)
	if st := s2.Status.Stats; *st.FilesUnchanged != 20 || *st.FilesNew != 0 || *st.BytesNew > *s1.Status.Stats.BytesNew/10 {
		t.Fatalf("second backup of unchanged data: stats %+v (first uploaded %d bytes)", st, *s1.Status.Stats.BytesNew)
	}
	second := m[1]
	// keepDaily and keepWeekly keep the newest Snapshot of each UTC day and
	// ISO week, so once retention has run the first one is pruned unless the
	// two runs ended on different days.
	want := []string{"snapshot.kopiur.home-operations.com/" + second}
	if e1, e2 := s1.Status.Timing.EndTime.UTC(), s2.Status.Timing.EndTime.UTC(); e1.Format("2006-01-02") != e2.Format("2006-01-02") {
		want = append(want, "snapshot.kopiur.home-operations.com/"+first)
	}
	eventually(t, func() error {
		names := strings.Fields(kubectl(t, nil, 0, "-n", ns, "get", "kopiasnap", "-o", "name").Stdout)
		if !slices.Equal(slices.Sorted(slices.Values(names)), slices.Sorted(slices.Values(want))) {
			return fmt.Errorf("snapshots %v, want %v once retention has run", names, want)
		}
		return nil
	})

	// Printer columns as the guide shows them, with the real values.
	out := kubectl(t, nil, 0, "-n", ns, "get", "snapshots").Stdout
	header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if strings.Join(header, " ") != "NAME PHASE ORIGIN SNAPSHOT AGE" {
		t.Fatalf("snapshot columns = %v, want NAME PHASE ORIGIN SNAPSHOT AGE\n%s", header, out)
	}
	out = kubectl(t, nil, 0, "-n", ns, "get", "snapshot", second, "--no-headers").Stdout
	if f := strings.Fields(out); len(f) != 5 || f[0] != second || f[1] != "Succeeded" || f[2] != "manual" || f[3] != s2.Status.Snapshot.KopiaSnapshotID {
		t.Fatalf("snapshot row = %q, want %s Succeeded manual %s <age>", out, second, s2.Status.Snapshot.KopiaSnapshotID)
	}
	if got := kubectl(t, nil, 0, "-n", ns, "get", "snapshot", second, "-o", "jsonpath={.status.stats.filesUnchanged}").Stdout; got != "20" {
		t.Fatalf("status.stats.filesUnchanged = %q, want 20", got)
	}
	wide := kubectl(t, nil, 0, "-n", ns, "get", "snapshots", "-o", "wide").Stdout
	if !strings.Contains(strings.SplitN(wide, "\n", 2)[0], "SOURCE") {
		t.Errorf("-o wide should add the SOURCE column:\n%s", wide)
	}
	if got := kubectl(t, nil, 0, "-n", ns, "get", "repository", "primary", "-o", "jsonpath={.status.phase} {.status.backend}").Stdout; got != "Ready filesystem" {
		t.Errorf("repository phase/backend = %q, want Ready filesystem", got)
	}
	// The staged VolumeSnapshot and PVC are gone once the runs finished.
	eventually(t, func() error {
		if out := kubectl(t, nil, 0, "-n", ns, "get", "pvc,volumesnapshots", "-o", "name").Stdout; strings.Contains(out, "-src") {
			return fmt.Errorf("staged objects left behind:\n%s", out)
		}
		return nil
	})

	out = kubectl(t, nil, 0, "-n", ns, "get", "snapshotpolicy", "app-data").Stdout
	if header := strings.Fields(strings.SplitN(out, "\n", 2)[0]); strings.Join(header, " ") != "NAME REPOSITORY REPOSITORIES LAST-SNAPSHOT LAST-VERIFIED SUSPENDED AGE" {
		t.Fatalf("policy columns = %v\n%s", header, out)
	}
	if !strings.Contains(out, "primary") {
		t.Fatalf("policy row should name its repository:\n%s", out)
	}

	// The kopiur category lists every snapflow object in the namespace.
	out = kubectl(t, nil, 0, "-n", ns, "get", "kopiur", "-o", "name").Stdout
	for _, obj := range []string{"repository.kopiur.home-operations.com/primary", "snapshotpolicy.kopiur.home-operations.com/app-data", want[0]} {
		if !strings.Contains(out, obj) {
			t.Errorf("kubectl get kopiur misses %s:\n%s", obj, out)
		}
	}
}
