package webhook

import (
	"os"
	"runtime/debug"
)

// TuneGC trades a little memory for admission latency. The webhook's heap is
// small and every request allocates while decoding, so the default GOGC of
// 100 collects so often that GC pauses dominate the tail latency. A soft
// memory limit keeps the larger GC target from growing past the container's
// budget. Operators can override both with GOGC and GOMEMLIMIT.
func TuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(192 << 20)
	}
}
