package prune

import "fmt"

// Confirmation words a real prune requires in --confirm; which one depends
// on --include-retained and --delete-repository-stray.
const (
	ConfirmDelete                 = "DELETE"
	ConfirmDeleteStray            = "DELETE-STRAY"
	ConfirmDeleteRetained         = "DELETE-RETAINED"
	ConfirmDeleteRetainedAndStray = "DELETE-RETAINED-AND-STRAY"
)

// ConfirmationWord returns the word a live prune requires. It depends only
// on the flags, never on which candidates exist, so it can be checked before
// any network access.
func ConfirmationWord(includeRetained, deleteRepositoryStray bool) string {
	switch {
	case includeRetained && deleteRepositoryStray:
		return ConfirmDeleteRetainedAndStray
	case includeRetained:
		return ConfirmDeleteRetained
	case deleteRepositoryStray:
		return ConfirmDeleteStray
	}
	return ConfirmDelete
}

// CheckConfirmation validates --confirm for a live prune.
func CheckConfirmation(opts Options, given string) error {
	if want := ConfirmationWord(opts.IncludeRetained, opts.DeleteRepositoryStray); given != want {
		return fmt.Errorf("live deletion requires --confirm %s", want)
	}
	return nil
}
