package v1alpha1

// Phases decode from any string: a newer snapflow may write a phase this
// build does not know. Callers ask IsKnown before acting on one, and treat an
// unknown phase as "leave it alone" rather than as an error.

// IsKnown reports whether this build understands the phase.
func (p SnapshotPhase) IsKnown() bool {
	switch p {
	case "", SnapshotPending, SnapshotRunning, SnapshotSucceeded, SnapshotFailed,
		SnapshotDeleting, SnapshotDiscovered, SnapshotUnchanged:
		return true
	}
	return false
}

// IsTerminal reports whether a run in this phase is over and never runs again.
func (p SnapshotPhase) IsTerminal() bool {
	switch p {
	case SnapshotSucceeded, SnapshotFailed, SnapshotUnchanged, SnapshotDiscovered:
		return true
	}
	return false
}

// IsKnown reports whether this build understands the phase.
func (p RestorePhase) IsKnown() bool {
	switch p {
	case "", RestorePending, RestoreResolving, RestoreRestoring, RestoreCompleted, RestoreFailed:
		return true
	}
	return false
}

// IsTerminal reports whether the restore is over.
func (p RestorePhase) IsTerminal() bool {
	return p == RestoreCompleted || p == RestoreFailed
}

// IsKnown reports whether this build understands the phase.
func (p RepositoryPhase) IsKnown() bool {
	switch p {
	case "", RepositoryPending, RepositoryInitializing, RepositoryReady, RepositoryDegraded, RepositoryFailed:
		return true
	}
	return false
}

// IsKnown reports whether this build understands the origin.
func (o Origin) IsKnown() bool {
	switch o {
	case OriginScheduled, OriginManual, OriginDiscovered, OriginAdopted, OriginReplicated:
		return true
	}
	return false
}
