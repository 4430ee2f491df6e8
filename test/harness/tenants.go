package harness

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// provisionTenants applies perNamespace(ns) to every namespace as it
// appears, the way a platform team lists each tenant namespace in the
// chart's mover.namespaces (or a namespace-provisioning controller does):
// tests make namespaces as they go, and each gets its own mover
// ServiceAccount and binding, nothing cluster-wide.
func provisionTenants(ctx context.Context, cs kubernetes.Interface, c client.Client, perNamespace func(ns string) []byte, log logr.Logger) error {
	f := informers.NewSharedInformerFactory(cs, 0)
	inf := f.Core().V1().Namespaces().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		ns, ok := obj.(*corev1.Namespace)
		if !ok || ns.Name == WebhookNamespace || strings.HasPrefix(ns.Name, "kube-") || ns.Name == "default" {
			return
		}
		if err := applyDocs(ctx, c, perNamespace(ns.Name)); err != nil && ctx.Err() == nil {
			log.Error(err, "provision tenant namespace", "namespace", ns.Name)
		}
	}})
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("namespace informer did not sync")
	}
	return nil
}

// applyDocs creates each YAML document of docs, leaving existing objects.
func applyDocs(ctx context.Context, c client.Client, docs []byte) error {
	for _, doc := range strings.Split(string(docs), "\n---") {
		if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(doc), "---")) == "" {
			continue
		}
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Create(ctx, &u); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	return nil
}
