package cli

import (
	"strings"
	"testing"
)

func TestRestoreFlagsBuild(t *testing.T) {
	tests := []struct {
		name    string
		flags   restoreFlags
		changed []string
		check   func(t *testing.T, f *restoreFlags, errText string)
		wantErr string
	}{
		{name: "snapshot to a new pvc", flags: restoreFlags{snapshot: "s1", toPVC: "copy", capacity: "2Gi"}},
		{name: "policy as of into a pvc", flags: restoreFlags{policy: "app", asOf: "2026-05-01T00:00:00Z", intoPVC: "data"}},
		{name: "identity with a cluster repository", flags: restoreFlags{identity: "app@prod:/pvc/data", repository: "ClusterRepository/offsite", toPVC: "c", capacity: "1Gi"}},
		{name: "no source", flags: restoreFlags{toPVC: "c", capacity: "1Gi"}, wantErr: "exactly one source"},
		{name: "two sources", flags: restoreFlags{snapshot: "s", policy: "p", toPVC: "c", capacity: "1Gi"}, wantErr: "exactly one source"},
		{name: "no target", flags: restoreFlags{snapshot: "s"}, wantErr: "--to-pvc NAME --capacity"},
		{name: "both targets", flags: restoreFlags{snapshot: "s", toPVC: "a", intoPVC: "b", capacity: "1Gi"}, wantErr: "choose one"},
		{name: "new pvc without capacity", flags: restoreFlags{snapshot: "s", toPVC: "a"}, wantErr: "--capacity"},
		{name: "bad capacity", flags: restoreFlags{snapshot: "s", toPVC: "a", capacity: "lots"}, wantErr: `--capacity "lots"`},
		{name: "identity without repository", flags: restoreFlags{identity: "app@prod", toPVC: "a", capacity: "1Gi"}, wantErr: "spec.repository"},
		{name: "malformed identity", flags: restoreFlags{identity: "prod", repository: "r", toPVC: "a", capacity: "1Gi"}, wantErr: "USER@HOST"},
		{name: "as-of with a snapshot", flags: restoreFlags{snapshot: "s", asOf: "2026-05-01T00:00:00Z", intoPVC: "d"}, wantErr: "--snapshot names one exactly"},
		{name: "bad as-of", flags: restoreFlags{policy: "p", asOf: "yesterday", intoPVC: "d"}, wantErr: "RFC3339"},
		{name: "bad repository kind", flags: restoreFlags{policy: "p", repository: "Bucket/x", intoPVC: "d"}, wantErr: "ClusterRepository/NAME"},
		{name: "bad on-missing", flags: restoreFlags{policy: "p", intoPVC: "d", onMissing: "Maybe"}, wantErr: "onMissingSnapshot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.flags
			f.options = map[string]*bool{}
			for _, of := range restoreOptionFlags {
				f.options[of.flag] = new(bool)
			}
			changed := func(n string) bool {
				for _, c := range tt.changed {
					if c == n {
						return true
					}
				}
				return false
			}
			rs, err := f.build("ns", "r", changed)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rs.Spec.Options != nil {
				t.Errorf("options set without any option flag: %+v", rs.Spec.Options)
			}
		})
	}
}

func TestRestoreFlagsOnlySetOptionsTheUserGave(t *testing.T) {
	f := restoreFlags{snapshot: "s", intoPVC: "d", options: map[string]*bool{}, parallel: 3}
	for _, of := range restoreOptionFlags {
		f.options[of.flag] = new(bool)
	}
	*f.options["delete-extra"] = true
	// overwrite-files given as false explicitly: a tri-state false, not unset.
	changed := map[string]bool{"delete-extra": true, "overwrite-files": true, "parallel": true}
	rs, err := f.build("ns", "r", func(n string) bool { return changed[n] })
	if err != nil {
		t.Fatal(err)
	}
	o := rs.Spec.Options
	if o == nil || o.EnableFileDeletion == nil || !*o.EnableFileDeletion || o.OverwriteFiles == nil || *o.OverwriteFiles || o.Parallel == nil || *o.Parallel != 3 {
		t.Fatalf("options %+v", o)
	}
	if o.SkipTimes != nil || o.OverwriteDirectories != nil {
		t.Fatalf("unset flags became options: %+v", o)
	}
}
