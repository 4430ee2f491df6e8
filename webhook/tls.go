package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/certs"
)

// SelfTLS keeps the webhook's own CA and serving certificate in a Secret,
// renews them before they expire, serves the current one without a restart,
// and keeps the webhook configurations' caBundle in step.
type SelfTLS struct {
	Client     client.Client
	Namespace  string
	SecretName string
	Hosts      certs.Hosts
	Policy     certs.Policy
	// Webhook configurations whose caBundle this CA goes into.
	MutatingConfigs, ValidatingConfigs []string
	Interval                           time.Duration
	Log                                logr.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	current atomic.Pointer[tls.Certificate]
}

// GetCertificate serves the current certificate (tls.Config.GetCertificate).
func (s *SelfTLS) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.current.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no serving certificate yet")
}

// Ready reports whether a certificate is loaded (a readyz check).
func (s *SelfTLS) Ready() error {
	if s.current.Load() == nil {
		return errors.New("no serving certificate yet")
	}
	return nil
}

func (s *SelfTLS) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Ensure makes the Secret hold a certificate that is good at now, loads it,
// and writes its CA into the webhook configurations.
func (s *SelfTLS) Ensure(ctx context.Context) error {
	key := client.ObjectKey{Namespace: s.Namespace, Name: s.SecretName}
	var sec corev1.Secret
	exists := true
	if err := s.Client.Get(ctx, key, &sec); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("read certificate Secret %s: %w", key, err)
		}
		exists = false
	}
	bundle := certs.FromData(sec.Data)
	now := s.now()
	action, why := certs.Plan(bundle, s.Hosts, s.Policy, now)
	if action != certs.Keep {
		next, err := certs.Apply(bundle, action, s.Hosts, s.Policy, now)
		if err != nil {
			return fmt.Errorf("%s: %w", action, err)
		}
		sec.Data = next.Data()
		sec.Type = corev1.SecretTypeOpaque
		if exists {
			// Optimistic concurrency: if another replica rotated first, this
			// update conflicts and the next pass loads its certificate.
			err = s.Client.Update(ctx, &sec)
		} else {
			sec.ObjectMeta = metav1.ObjectMeta{Namespace: s.Namespace, Name: s.SecretName,
				Labels: map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue}}
			err = s.Client.Create(ctx, &sec)
		}
		if err != nil {
			return fmt.Errorf("store renewed certificate in Secret %s: %w", key, err)
		}
		what := "leaf"
		if action == certs.NewCA {
			what = "ca"
		}
		certRotations.WithLabelValues(what).Inc()
		s.Log.Info("renewed webhook certificate", "action", action.String(), "why", why, "secret", key.String())
		bundle = next
	}
	cert, err := bundle.TLSCertificate()
	if err != nil {
		return err
	}
	s.current.Store(cert)
	return s.patchCABundle(ctx, bundle.CABundle())
}

func (s *SelfTLS) patchCABundle(ctx context.Context, ca []byte) error {
	var errs []error
	for _, name := range s.MutatingConfigs {
		errs = append(errs, setCABundle(ctx, s.Client, name, &admissionregv1.MutatingWebhookConfiguration{}, ca))
	}
	for _, name := range s.ValidatingConfigs {
		errs = append(errs, setCABundle(ctx, s.Client, name, &admissionregv1.ValidatingWebhookConfiguration{}, ca))
	}
	return errors.Join(errs...)
}

// clientConfigs points at every webhook's client config in a configuration.
func clientConfigs(cfg client.Object) []*admissionregv1.WebhookClientConfig {
	var out []*admissionregv1.WebhookClientConfig
	switch c := cfg.(type) {
	case *admissionregv1.MutatingWebhookConfiguration:
		for i := range c.Webhooks {
			out = append(out, &c.Webhooks[i].ClientConfig)
		}
	case *admissionregv1.ValidatingWebhookConfiguration:
		for i := range c.Webhooks {
			out = append(out, &c.Webhooks[i].ClientConfig)
		}
	}
	return out
}

// setCABundle writes ca into every webhook of one configuration, updating it only when something changed.
func setCABundle(ctx context.Context, c client.Client, name string, cfg client.Object, ca []byte) error {
	kind := fmt.Sprintf("%T", cfg)[len("*v1."):]
	if err := c.Get(ctx, client.ObjectKey{Name: name}, cfg); err != nil {
		return fmt.Errorf("read %s %s: %w", kind, name, err)
	}
	changed := false
	for _, cc := range clientConfigs(cfg) {
		if !bytes.Equal(cc.CABundle, ca) {
			cc.CABundle, changed = ca, true
		}
	}
	if !changed {
		return nil
	}
	if err := c.Update(ctx, cfg); err != nil {
		return fmt.Errorf("update caBundle of %s %s: %w", kind, name, err)
	}
	return nil
}

// Start re-checks the certificate every Interval until ctx ends (a manager Runnable).
func (s *SelfTLS) Start(ctx context.Context) error {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := s.Ensure(ctx); err != nil {
				s.Log.Error(err, "webhook certificate check failed; retrying")
			}
		}
	}
}
