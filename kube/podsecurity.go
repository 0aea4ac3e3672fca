package kube

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// PodSecurity is the strictest Pod Security Standard a pod meets, judged by
// the checks the API server's Pod Security admission runs, and what each
// stricter level objects to.
type PodSecurity struct {
	Level string // "restricted", "baseline" or "privileged"
	// Refused says, for each stricter level the pod fails, why:
	// "baseline: hostPath volumes (volume cache)".
	Refused []string
}

// String is the line render prints.
func (p PodSecurity) String() string {
	s := fmt.Sprintf("the pods meet Pod Security level %s (a namespace labelled pod-security.kubernetes.io/enforce=%s admits them)", p.Level, p.Level)
	if len(p.Refused) > 0 {
		s += "; " + strings.Join(p.Refused, "; ")
	}
	return s
}

// podSecurityOf evaluates the pod template at the latest policy version, as
// an enforce label without a version does.
func podSecurityOf(meta *metav1.ObjectMeta, spec *corev1.PodSpec) (PodSecurity, error) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return PodSecurity{}, fmt.Errorf("pod security checks: %w", err)
	}
	var refused []string
	for _, level := range []psaapi.Level{psaapi.LevelRestricted, psaapi.LevelBaseline} {
		res := policy.AggregateCheckResults(eval.EvaluatePod(psaapi.LevelVersion{Level: level, Version: psaapi.LatestVersion()}, meta, spec))
		if res.Allowed {
			return PodSecurity{Level: string(level), Refused: refused}, nil
		}
		refused = append(refused, fmt.Sprintf("%s refuses %s", level, res.ForbiddenDetail()))
	}
	return PodSecurity{Level: string(psaapi.LevelPrivileged), Refused: refused}, nil
}
