package localnode

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestCapabilities(t *testing.T) {
	cases := []struct {
		name string
		sc   *corev1.SecurityContext
		want []string
		not  []string
	}{
		{"runtime defaults", nil, []string{"CAP_CHOWN", "CAP_KILL", "CAP_NET_BIND_SERVICE"}, []string{"CAP_SYS_ADMIN"}},
		{"drop all", &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}, nil, []string{"CAP_CHOWN"}},
		{"drop all, add one", &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}}},
			[]string{"CAP_NET_BIND_SERVICE"}, []string{"CAP_CHOWN"}},
		{"drop one by its CAP_ name", &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"CAP_CHOWN"}}}, []string{"CAP_KILL"}, []string{"CAP_CHOWN"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := capabilities(c.sc)
			for _, w := range c.want {
				if !slices.Contains(got, w) {
					t.Errorf("%v lacks %s", got, w)
				}
			}
			for _, n := range c.not {
				if slices.Contains(got, n) {
					t.Errorf("%v has %s", got, n)
				}
			}
			if c.want == nil && len(got) != 0 {
				t.Errorf("%v, want none", got)
			}
		})
	}
}

func TestHostname(t *testing.T) {
	long := strings.Repeat("a", 62) + "-bcdef"
	if h := hostname(long); len(h) > 63 || strings.HasSuffix(h, "-") {
		t.Fatalf("hostname(%q) = %q", long, h)
	}
	if h := hostname("mover-x1"); h != "mover-x1" {
		t.Fatalf("a short name changed: %q", h)
	}
}

// A container's variable wins over the image's of the same name.
func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"PATH=/usr/local/bin", "HOME=/home/nonroot"}, []string{"HOME=/work", "A=b"})
	slices.Sort(got)
	want := []string{"A=b", "HOME=/work", "PATH=/usr/local/bin"}
	if !slices.Equal(got, want) {
		t.Fatalf("mergeEnv = %v, want %v", got, want)
	}
}
