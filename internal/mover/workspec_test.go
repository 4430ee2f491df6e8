package mover

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct{ name, in, wantErr string }{
		{"snapshot", `{"operation":"snapshot","target":{"kind":"Snapshot","name":"s"},"repository":{"backend":{"filesystem":{"path":"/r"}}},"snapshot":{"source":{"username":"u","hostname":"h","path":"/p"},"policy":{"ignoreRules":null}}}`, ""},
		{"bootstrap", `{"operation":"bootstrap","target":{"kind":"Repository","name":"r"},"repository":{"backend":{"s3":{"bucket":"b"}}}}`, ""},
		{"not json", `{`, "decode the work spec"},
		{"no target", `{"operation":"bootstrap","repository":{"backend":{"s3":{"bucket":"b"}}}}`, "target.kind and target.name"},
		{"unknown op", `{"operation":"dance","target":{"kind":"Snapshot","name":"s"},"repository":{"backend":{"s3":{"bucket":"b"}}}}`, `unknown operation "dance"`},
		{"snapshot without section", `{"operation":"snapshot","target":{"kind":"Snapshot","name":"s"},"repository":{"backend":{"s3":{"bucket":"b"}}}}`, "needs a snapshot section"},
		{"probe", `{"operation":"probe","target":{"kind":"Repository","name":"r"},"repository":{"backend":{"s3":{"bucket":"b"}}}}`, ""},
		{"a probe that would create", `{"operation":"probe","target":{"kind":"Repository","name":"r"},"repository":{"backend":{"s3":{"bucket":"b"}},"create":{}}}`, "never creates"},
		{"no backend", `{"operation":"bootstrap","target":{"kind":"Repository","name":"r"},"repository":{}}`, "no supported backend"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.in))
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want %q", err, c.wantErr)
			}
		})
	}
}

func TestExecTimeoutSeconds(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"", 0, false},
		{"30s", 30, false},
		{"1m30s", 90, false},
		{"1500ms", 2, false}, // rounded up: a bound stays a bound
		{"10", 0, true},      // no unit
		{"-5s", 0, true},
	} {
		got, err := ExecTimeoutSeconds(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ExecTimeoutSeconds(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
