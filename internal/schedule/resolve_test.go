package schedule

import (
	"strings"
	"testing"
	"time"
)

func TestResolve(t *testing.T) {
	r, err := Resolve("0 3 * * *", "", "", []Defaults{{Timezone: "Europe/Berlin", Jitter: "10m"}}, "ns/s", "uid")
	if err != nil {
		t.Fatal(err)
	}
	if r.Timezone != "Europe/Berlin" || r.Spec.Location.String() != "Europe/Berlin" || r.Spec.Jitter != 10*time.Minute || r.Spec.Seed != "ns/s" || r.Spec.UID != "uid" {
		t.Fatalf("resolved %+v", r)
	}
	if _, err := Resolve("0 3 * * *", "Mars/Olympus", "", nil, "s", "u"); err == nil || !strings.Contains(err.Error(), `timezone "Mars/Olympus"`) {
		t.Fatalf("bad timezone: %v", err)
	}
	if _, err := Resolve("0 3 * * *", "UTC", "soon", nil, "s", "u"); err == nil || !strings.Contains(err.Error(), `jitter "soon"`) {
		t.Fatalf("bad jitter: %v", err)
	}
}
