package harness

import (
	"os"
	"strconv"
	"time"
)

// TimeoutScaleEnv names the variable that stretches every deadline of the
// suite: a test waits on a condition, and how long it may wait is a base
// tuned on an idle machine times this scale.
const TimeoutScaleEnv = "SNAPFLOW_TEST_TIMEOUT_SCALE"

// defaultTimeoutScale leaves room for a loaded 2-core machine: the slowest
// waits measured there took under half of their base deadline times two.
const defaultTimeoutScale = 2.0

// TimeoutScale is the factor from SNAPFLOW_TEST_TIMEOUT_SCALE (a positive
// number), or the default when it is unset or not a positive number.
func TimeoutScale() float64 {
	if v, err := strconv.ParseFloat(os.Getenv(TimeoutScaleEnv), 64); err == nil && v > 0 {
		return v
	}
	return defaultTimeoutScale
}

// Timeout scales a base deadline by TimeoutScale.
func Timeout(base time.Duration) time.Duration {
	return time.Duration(float64(base) * TimeoutScale())
}
