package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The resources tt-model writes.
var (
	configMaps   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	services     = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	statefulSets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	claims       = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
	// claimTemplates is each pod's DRA chip claim template (ChipsDRA).
	claimTemplates = resourcev1.SchemeGroupVersion.WithResource("resourceclaimtemplates")
)

var resourceOfKind = map[string]schema.GroupVersionResource{
	"ConfigMap": configMaps, "Service": services, "StatefulSet": statefulSets, "ResourceClaimTemplate": claimTemplates,
}

// DefaultChips is the chip mode for this cluster when the user names none:
// ChipsDRA where the API server serves resource.k8s.io/v1 with
// ResourceClaimTemplates (Kubernetes 1.34 on, unless turned off), else
// ChipsDevicePlugin. The answer comes from the API server's discovery.
func (c *Cluster) DefaultChips(ctx context.Context) (string, error) {
	path := "/apis/" + claimTemplates.GroupVersion().String()
	raw, err := c.core.RESTClient().Get().AbsPath(path).DoRaw(ctx)
	if apierrors.IsNotFound(err) {
		return ChipsDevicePlugin, nil
	}
	if err != nil {
		return "", fmt.Errorf("discovery %s: %w (name --chips to skip the question)", path, err)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", fmt.Errorf("discovery %s: %w", path, err)
	}
	for _, r := range list.APIResources {
		if r.Name == claimTemplates.Resource {
			return ChipsDRA, nil
		}
	}
	return ChipsDevicePlugin, nil
}

// ApplyOptions are the apply flags.
type ApplyOptions struct {
	DryRun bool // the API server validates, admits and defaults, and stores nothing (dryRun=All)
	// Force takes over fields another field manager owns (kubectl's
	// --force-conflicts); without it such a conflict is an error.
	Force bool
}

// Apply sends each object with server-side apply as field manager tt-model,
// into the manifests' namespace or else the kubeconfig's, and returns what
// the API server answered, in order.
func (c *Cluster) Apply(ctx context.Context, m *Manifests, opts ApplyOptions) ([]*unstructured.Unstructured, error) {
	ns := c.namespaceFor(m.Namespace)
	ao := metav1.ApplyOptions{FieldManager: FieldManager, Force: opts.Force}
	if opts.DryRun {
		ao.DryRun = []string{metav1.DryRunAll}
	}
	var out []*unstructured.Unstructured
	for _, obj := range m.Objects() {
		u, err := Unstructured(obj)
		if err != nil {
			return out, err
		}
		u.SetNamespace(ns)
		gvr, ok := resourceOfKind[u.GetKind()]
		if !ok {
			return out, fmt.Errorf("apply: no resource known for kind %s", u.GetKind())
		}
		got, err := c.dyn.Resource(gvr).Namespace(ns).Apply(ctx, u.GetName(), u, ao)
		if err != nil {
			return out, applyError(u, ns, err)
		}
		out = append(out, got)
	}
	return out, nil
}

// applyError says which object failed and, for the common causes, what to do.
func applyError(u *unstructured.Unstructured, ns string, err error) error {
	what := fmt.Sprintf("apply %s %s/%s", u.GetKind(), ns, u.GetName())
	switch {
	case apierrors.IsConflict(err):
		return fmt.Errorf("%s: another field manager owns fields tt-model sets (give --force-conflicts to take them over): %w", what, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: %w (does namespace %q exist?)", what, err, ns)
	case apierrors.IsInvalid(err) && u.GetKind() == "StatefulSet":
		return fmt.Errorf("%s: %w (a StatefulSet's volume claims, service name and pod management cannot change: delete it first; its PVCs are kept)", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (c *Cluster) namespaceFor(ns string) string {
	if ns != "" {
		return ns
	}
	if c.Namespace != "" {
		return c.Namespace
	}
	return metav1.NamespaceDefault
}

type kindResource struct {
	kind string
	gvr  schema.GroupVersionResource
}

// DeleteOptions are the delete flags.
type DeleteOptions struct {
	DryRun bool
	// Volumes also deletes the replicas' cache PVCs (the weights, the
	// kernel cache and the hang markers), kept otherwise.
	Volumes bool
}

// Delete removes the objects tt-model applied for instance name (found by
// their labels) and returns "Kind/name" for each.
func (c *Cluster) Delete(ctx context.Context, namespace, name string, opts DeleteOptions) ([]string, error) {
	ns := c.namespaceFor(namespace)
	sel := labels.SelectorFromSet(labels.Set{labelInstance: name, labelManagedBy: FieldManager}).String()
	kinds := []kindResource{{"StatefulSet", statefulSets}, {"Service", services}, {"ConfigMap", configMaps}}
	// A cluster that serves no DRA API holds no claim templates to list.
	dra, err := c.DefaultChips(ctx)
	if err != nil {
		return nil, err
	}
	if dra == ChipsDRA {
		kinds = append(kinds, kindResource{"ResourceClaimTemplate", claimTemplates})
	}
	if opts.Volumes {
		kinds = append(kinds, kindResource{"PersistentVolumeClaim", claims})
	}
	do := metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationBackground)}
	if opts.DryRun {
		do.DryRun = []string{metav1.DryRunAll}
	}
	var deleted []string
	for _, k := range kinds {
		list, err := c.dyn.Resource(k.gvr).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return deleted, fmt.Errorf("list %ss of %s in %s: %w", k.kind, name, ns, err)
		}
		for _, item := range list.Items {
			err := c.dyn.Resource(k.gvr).Namespace(ns).Delete(ctx, item.GetName(), do)
			if err != nil && !apierrors.IsNotFound(err) {
				return deleted, fmt.Errorf("delete %s %s/%s: %w", k.kind, ns, item.GetName(), err)
			}
			deleted = append(deleted, k.kind+"/"+item.GetName())
		}
	}
	if len(deleted) == 0 {
		return nil, &NotFoundError{Name: name, Namespace: ns}
	}
	return deleted, nil
}

// NotFoundError says no object of an instance is in the namespace.
type NotFoundError struct{ Name, Namespace string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no %s objects labelled %s=%s in namespace %s", FieldManager, labelInstance, e.Name, e.Namespace)
}

// IsNotFound reports whether err is a NotFoundError.
func IsNotFound(err error) bool {
	var nf *NotFoundError
	return errors.As(err, &nf)
}
