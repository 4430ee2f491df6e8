package localnode

import "testing"

func TestTail(t *testing.T) {
	for _, tc := range []struct {
		in    string
		lines int
		want  string
	}{
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\nc\n", 5, "a\nb\nc\n"},
		{"a\nb\nc\n", 0, ""},
		{"", 3, ""},
		{"only\n", 1, "only\n"},
	} {
		if got := string(tail([]byte(tc.in), tc.lines)); got != tc.want {
			t.Errorf("tail(%q, %d) = %q, want %q", tc.in, tc.lines, got, tc.want)
		}
	}
	for _, bad := range [][]string{{"ns", "..", "c"}, {"ns", "", "c"}, {"ns", "p", "a\\b"}} {
		if !badSegments(bad) {
			t.Errorf("%q passed as safe path segments", bad)
		}
	}
}
