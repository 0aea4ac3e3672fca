package kube

import (
	"bytes"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// Unstructured converts a rendered object to what is applied and printed:
// its fields as JSON would carry them, without the status and the null
// creation timestamps that the Go types add and no one sets.
func Unstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %T: %w", obj, err)
	}
	prune(m, true)
	return &unstructured.Unstructured{Object: m}, nil
}

// prune drops null creationTimestamps everywhere and the status of an
// object (top is true) or of a claim template.
func prune(v any, top bool) {
	switch t := v.(type) {
	case map[string]any:
		if ts, ok := t["creationTimestamp"]; ok && ts == nil {
			delete(t, "creationTimestamp")
		}
		if top {
			delete(t, "status")
		}
		for k, child := range t {
			if k == "volumeClaimTemplates" {
				for _, c := range asSlice(child) {
					if cm, ok := c.(map[string]any); ok {
						delete(cm, "status")
					}
				}
			}
			prune(child, false)
		}
	case []any:
		for _, child := range t {
			prune(child, false)
		}
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// YAML encodes the objects as one multi-document stream, in order.
func YAML(objs []runtime.Object) ([]byte, error) {
	var buf bytes.Buffer
	for i, obj := range objs {
		doc, err := ObjectYAML(obj)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(doc)
	}
	return buf.Bytes(), nil
}

// ObjectYAML encodes one object.
func ObjectYAML(obj runtime.Object) ([]byte, error) {
	u, err := Unstructured(obj)
	if err != nil {
		return nil, err
	}
	out, err := yaml.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("encode %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return out, nil
}
