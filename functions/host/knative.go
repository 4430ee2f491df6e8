package host

import (
	"strings"

	"knative.dev/pkg/kmeta"
)

// Knative Eventing (with its authentication-oidc feature) delivers each
// Trigger's events with a token of a ServiceAccount it makes for that
// Trigger, named from the Trigger by kmeta.ChildName (hashed when the
// name would pass 63 characters). Deriving the user here, instead of
// spelling it in the chart, keeps long release names working.
const knativeTriggerSuffix = "-oidc-eventing.knative.dev-trigger"

// KnativeTriggerSender is the user a Trigger's deliveries carry.
func KnativeTriggerSender(namespace, trigger string) string {
	return "system:serviceaccount:" + namespace + ":" + strings.ToLower(kmeta.ChildName(trigger, knativeTriggerSuffix))
}

// KnativeServiceAudience is the audience a Knative Service is addressed
// with in Knative's own format (<group>/<kind>/<namespace>/<name>); the
// chart sets it on each Trigger's subscriber, since Knative Serving does
// not announce one.
func KnativeServiceAudience(namespace, service string) string {
	return strings.ToLower("serving.knative.dev/service/" + namespace + "/" + service)
}
