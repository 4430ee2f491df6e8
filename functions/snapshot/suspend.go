package snapshot

import (
	"github.com/snapflow/snapflow/api/wellknown"
)

// ReasonRepositorySuspended: the run's repository has spec.suspend set;
// it waits until the repository is resumed.
const ReasonRepositorySuspended = wellknown.ReasonRepositorySuspended
