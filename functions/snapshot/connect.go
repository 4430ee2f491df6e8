package snapshot

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// DefaultRepositoryRetryMax is the longest a failing repository waits
// between connect attempts.
const DefaultRepositoryRetryMax = 30 * time.Minute

// nextConnect is the retry state after a connect attempt at generation gen
// ended at ended without connecting. Each wait is as long as the repository
// has been failing at this generation, between base and ceiling, so attempts
// thin out roughly by doubling: a repository whose Secret is wrong for a
// week costs a few Jobs an hour, not one a minute. An attempt already
// counted (the same end time) changes nothing, so redelivered events do not
// count twice.
func nextConnect(prev *snapv1.ConnectStatus, gen int64, ended time.Time, base, ceiling time.Duration) *snapv1.ConnectStatus {
	ended = ended.Truncate(time.Second) // as metav1.Time stores it
	next := snapv1.ConnectStatus{Generation: gen, Attempts: 1, FailingSince: metav1.NewTime(ended)}
	if prev != nil && prev.Generation == gen {
		next.Attempts, next.FailingSince = prev.Attempts, prev.FailingSince
		if ended.After(prev.LastAttemptAt.Time) {
			next.Attempts++
		}
	}
	wait := ended.Sub(next.FailingSince.Time)
	wait = min(max(wait, base), ceiling)
	next.LastAttemptAt = metav1.NewTime(ended)
	next.NextAttemptAt = metav1.NewTime(ended.Add(wait))
	return &next
}
