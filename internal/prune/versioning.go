package prune

import (
	"errors"
	"fmt"
	"strings"
)

// VersioningMode is --bucket-versioning.
type VersioningMode string

// Versioning modes.
const (
	ModeAuto      VersioningMode = "auto"
	ModeDisabled  VersioningMode = "disabled"
	ModeEnabled   VersioningMode = "enabled"
	ModeSuspended VersioningMode = "suspended"
)

// VersioningState is the bucket versioning state.
type VersioningState string

// Versioning states.
const (
	VersioningDisabled  VersioningState = "Disabled"
	VersioningEnabled   VersioningState = "Enabled"
	VersioningSuspended VersioningState = "Suspended"
)

// VersioningSource records where the state came from.
type VersioningSource string

// Versioning sources.
const (
	SourceDetected         VersioningSource = "detected"
	SourceOperatorOverride VersioningSource = "operator-override"
)

// ParseVersioningMode parses --bucket-versioning: trimmed, case-insensitive,
// empty meaning auto.
func ParseVersioningMode(s string) (VersioningMode, error) {
	switch m := VersioningMode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return ModeAuto, nil
	case ModeAuto, ModeDisabled, ModeEnabled, ModeSuspended:
		return m, nil
	default:
		return "", fmt.Errorf("invalid --bucket-versioning %q: want auto, disabled, enabled or suspended", s)
	}
}

// NeedsVersioningQuery reports whether the mode calls GetBucketVersioning.
func NeedsVersioningQuery(m VersioningMode) bool { return m == ModeAuto }

// ParseVersioningStatus maps a GetBucketVersioning status; an empty status
// means the bucket was never versioned.
func ParseVersioningStatus(status string) (VersioningState, error) {
	switch VersioningState(status) {
	case "", VersioningDisabled:
		return VersioningDisabled, nil
	case VersioningEnabled, VersioningSuspended:
		return VersioningState(status), nil
	default:
		return "", fmt.Errorf("unknown bucket versioning status %q", status)
	}
}

// ResolveVersioning returns the state and source the plan records. detected
// is the GetBucketVersioning status and is only read in auto mode.
func ResolveVersioning(m VersioningMode, detected string) (VersioningState, VersioningSource, error) {
	switch m {
	case ModeAuto, "":
		st, err := ParseVersioningStatus(detected)
		return st, SourceDetected, err
	case ModeDisabled:
		return VersioningDisabled, SourceOperatorOverride, nil
	case ModeEnabled:
		return VersioningEnabled, SourceOperatorOverride, nil
	case ModeSuspended:
		return VersioningSuspended, SourceOperatorOverride, nil
	}
	return "", "", fmt.Errorf("invalid versioning mode %q", m)
}

// RequiresPurgeVersions reports whether real deletion needs --purge-versions.
func RequiresPurgeVersions(st VersioningState) bool {
	return st == VersioningEnabled || st == VersioningSuspended
}

// VersionedListing reports whether candidate scopes are listed with
// ListObjectVersions: with --purge-versions on a bucket that is or was
// versioned. The same condition is used everywhere, at plan and at
// execution, rather than listing versions whenever --purge-versions is set.
func VersionedListing(purgeVersions bool, st VersioningState) bool {
	return Options{PurgeVersions: purgeVersions, Versioning: st}.versionedScopes()
}

// DiscoveryVersioned reports whether the top-level and shallow listings use
// version listing: whenever --purge-versions is set.
func DiscoveryVersioned(purgeVersions bool) bool { return purgeVersions }

// CheckVersioningUnchanged is the execution-time re-check of versioning: with a
// detected source the freshly queried status must equal the planned state.
func CheckVersioningUnchanged(p Plan, detected string) error {
	if p.VersioningSource != SourceDetected {
		return nil
	}
	st, err := ParseVersioningStatus(detected)
	if err != nil {
		return err
	}
	if st != p.Versioning {
		return fmt.Errorf("%w: versioning changed after planning: %s -> %s", ErrUnsafe, p.Versioning, st)
	}
	return nil
}

// errVersioning is returned by the global guards for an unusable state.
var errVersioning = errors.New("bucket versioning state is not Disabled, Enabled or Suspended")
