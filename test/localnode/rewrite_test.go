package localnode

import "testing"

func TestRewritePaths(t *testing.T) {
	mounts := []mount{{container: "/data/sub", host: "/h/sub"}, {container: "/data", host: "/h/data"}, {container: "/dev/termination-log", host: "/h/term"}}
	cases := map[string]string{
		"/data":                            "/h/data",
		"/data/docs/f.txt":                 "/h/data/docs/f.txt",
		"mkdir -p /data/docs":              "mkdir -p /h/data/docs",
		"ls /data /data/x":                 "ls /h/data /h/data/x",
		"--source=/data":                   "--source=/h/data",
		"/data/sub/x":                      "/h/sub/x",
		"/database":                        "/database",
		"/var/data":                        "/var/data",
		"echo done > /dev/termination-log": "echo done > /h/term",
		`sh -c "cat /data/a"`:              `sh -c "cat /h/data/a"`,
	}
	for in, want := range cases {
		if got := rewritePaths(in, mounts); got != want {
			t.Errorf("rewritePaths(%q) = %q, want %q", in, got, want)
		}
	}
}
