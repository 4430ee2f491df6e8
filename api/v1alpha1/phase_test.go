package v1alpha1

import (
	"encoding/json"
	"testing"
)

// A phase written by a newer snapflow must decode, and report itself unknown,
// rather than break every client reading the object.
func TestUnknownPhaseDecodes(t *testing.T) {
	tests := []struct {
		raw      string
		known    bool
		terminal bool
	}{
		{`{"phase":"Succeeded"}`, true, true},
		{`{"phase":"Unchanged"}`, true, true},
		{`{"phase":"Running"}`, true, false},
		{`{}`, true, false},
		{`{"phase":"Quarantined"}`, false, false},
	}
	for _, tc := range tests {
		var st SnapshotStatus
		if err := json.Unmarshal([]byte(tc.raw), &st); err != nil {
			t.Fatalf("%s: %v", tc.raw, err)
		}
		if st.Phase.IsKnown() != tc.known || st.Phase.IsTerminal() != tc.terminal {
			t.Errorf("%s: known=%v terminal=%v, want %v %v", tc.raw, st.Phase.IsKnown(), st.Phase.IsTerminal(), tc.known, tc.terminal)
		}
	}
	var rs RestoreStatus
	if err := json.Unmarshal([]byte(`{"phase":"Verifying"}`), &rs); err != nil || rs.Phase.IsKnown() {
		t.Fatalf("restore phase: %v known=%v", err, rs.Phase.IsKnown())
	}
	var repo RepositoryStatus
	if err := json.Unmarshal([]byte(`{"phase":"Ready"}`), &repo); err != nil || !repo.Phase.IsKnown() {
		t.Fatalf("repository phase: %v known=%v", err, repo.Phase.IsKnown())
	}
	if Origin("imported").IsKnown() || !OriginManual.IsKnown() {
		t.Fatal("origin IsKnown")
	}
}
