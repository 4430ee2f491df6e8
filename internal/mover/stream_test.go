package mover

import (
	"context"
	"errors"
	"strings"
	"testing"

	utilexec "k8s.io/client-go/util/exec"
)

func TestTailWriterKeepsTheEnd(t *testing.T) {
	w := tailWriter{max: 8}
	_, _ = w.Write([]byte("abc"))
	if w.String() != "abc" {
		t.Fatalf("short: %q", w.String())
	}
	_, _ = w.Write([]byte("defghijkl"))
	if w.String() != "…efghijkl" {
		t.Fatalf("long: %q", w.String())
	}
}

func TestExecFailuresSayWhatHappened(t *testing.T) {
	r := &execRun{work: &ExecWork{Namespace: "db", Pod: "pg-0", Container: "pg", Command: []string{"pg_dump", "app"}, TimeoutSeconds: 60}, stderr: tailWriter{max: 100}}
	_, _ = r.stderr.Write([]byte("pg_dump: connection refused\n"))
	for _, c := range []struct {
		err, ctxErr error
		want        string
	}{
		{utilexec.CodeExitError{Err: errors.New("x"), Code: 2}, nil, "exited with code 2"},
		{context.DeadlineExceeded, context.DeadlineExceeded, "did not finish within its timeout of 1m0s"},
		{errors.New("pods \"pg-0\" is forbidden"), nil, "could not be run: pods \"pg-0\" is forbidden"},
	} {
		got := r.describe(c.err, c.ctxErr).Error()
		if !strings.Contains(got, c.want) || !strings.Contains(got, `"pg_dump app" in pod db/pg-0, container pg`) || !strings.HasSuffix(got, "stderr: pg_dump: connection refused") {
			t.Errorf("%v: %q", c.err, got)
		}
	}
	if r.describe(nil, nil) != nil {
		t.Error("exit 0 is no failure")
	}
}

func TestParseChecksTheStream(t *testing.T) {
	base := `{"operation":"snapshot","target":{"kind":"Snapshot","namespace":"db","name":"s","uid":"u"},"repository":{"kind":"Repository","name":"r","backend":{"filesystem":{"path":"/r"}}},"snapshot":{"source":{"username":"u","hostname":"h","path":"/stream/x"},"policy":{},"stream":%s}}`
	for _, c := range []struct{ stream, err string }{
		{`{"namespace":"db","pod":"pg-0","container":"pg","command":["pg_dump"],"fileName":"x"}`, ""},
		{`{"namespace":"db","pod":"pg-0","container":"pg","command":[],"fileName":"x"}`, "needs namespace, pod, container, command and fileName"},
		{`{"namespace":"other","pod":"pg-0","container":"pg","command":["pg_dump"],"fileName":"x"}`, "not the target's db"},
	} {
		_, err := Parse([]byte(strings.Replace(base, "%s", c.stream, 1)))
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: %v, want %q", c.stream, err, c.err)
		}
	}
}
