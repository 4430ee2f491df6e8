package mover

import (
	"slices"
	"strings"
	"testing"
)

func TestDeletedMembersRoundTrip(t *testing.T) {
	for _, idx := range [][]int{nil, {0}, {0, 1, 2, 3, 5}, {7, 3, 3, 4}, {0, 2, 4, 6, 8, 199}} {
		msg := "deleted 3 kopia snapshots\n" + FormatDeleted(idx)
		got, err := ParseDeleted(msg, 200)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Compact(slices.Sorted(slices.Values(idx)))
		if !slices.Equal(got, want) {
			t.Errorf("%v: got %v via %q", idx, got, msg)
		}
	}
	all := make([]int, 200)
	for i := range all {
		all[i] = i * 2 % 200
	}
	if s := FormatDeleted(all); len(s) > 1024 {
		t.Errorf("a full batch takes %d bytes", len(s))
	}
	if got, err := ParseDeleted("Failed: the repository is unreachable", 5); err != nil || got != nil {
		t.Errorf("a message without the line: %v %v", got, err)
	}
	for _, bad := range []string{"5", "0-9", "3-1", "x", "-1"} {
		if _, err := ParseDeleted(DeletedPrefix+bad, 5); err == nil || !strings.Contains(err.Error(), "deleted members") {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}
