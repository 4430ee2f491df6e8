package host

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Refused says whether the API server refused a write for what it asked
// (an admission webhook's denial, a validation error, a bad request):
// sending the same event again cannot succeed until someone changes the
// request or the configuration, so a handler answers 400, not 500, which a
// broker would retry for ever.
func Refused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}
