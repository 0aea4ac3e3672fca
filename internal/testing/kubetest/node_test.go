package kubetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ttmodel/tt-model/internal/testing/kubebin"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
)

// TestNodeRunsAPodAndLeavesNothing starts a node, runs a pod on it (the
// sandbox image as its container), checks pod networking from the host,
// stops the node, and requires the host as it was: no bridge, no FORWARD
// rule or KUBE-* chain of its own, the kubelet's tunables restored, no
// kubepods cgroup, no mount or process under its folder.
func TestNodeRunsAPodAndLeavesNothing(t *testing.T) {
	testenv.Require(t, kubebin.NodeRequirement)
	binDir, err := kubebin.Dir()
	if err != nil {
		t.Fatal(err)
	}
	bins, err := kubebin.Node(binDir)
	if err != nil {
		t.Fatal(err)
	}
	state, err := os.MkdirTemp("", "ttk")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(state)
	ctx := context.Background()
	start := time.Now()
	n, err := StartNode(ctx, binDir, state, bins)
	if err != nil {
		t.Fatal(err)
	}
	// What the host was before, as the node recorded it once it held the
	// machine lock (other test binaries' nodes run before and after it).
	before := n.host
	stopped := false
	defer func() {
		if !stopped {
			n.teardown()
		}
		n.unlock()
	}()
	testenv.Record(t, "node %s Ready %.1fs after start", NodeName, time.Since(start).Seconds())

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pause"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "pause", Image: n.Registry + "/" + pauseRef,
		}}},
	}
	pods := n.Client().CoreV1().Pods("default")
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ip string
	if err := waitFor(ctx, 2*time.Minute, "pod pause Running", func() error {
		p, err := pods.Get(ctx, "pause", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return permanentIf(p.Status.Phase == corev1.PodFailed, "phase %s: %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		ip = p.Status.PodIP
		return nil
	}); err != nil {
		t.Fatalf("%v\n--- kubelet\n%s\n--- containerd\n%s", err, n.Logs("kubelet"), n.Logs("containerd"))
	}
	if !strings.HasPrefix(ip, "10.244.0.") {
		t.Errorf("pod IP %q, want one on the node's pod network", ip)
	}
	if out, err := exec.Command("ping", "-c", "1", "-W", "5", ip).CombinedOutput(); err != nil && !strings.Contains(err.Error(), "executable file not found") {
		t.Errorf("the host cannot reach the pod at %s: %v\n%s", ip, err, out)
	}

	testenv.Record(t, "pod pause Running at %s on node %s", ip, NodeName)
	// Compared before the lock is released: the next node changes the same tables.
	n.teardown()
	stopped = true
	after, err := recordHost(state)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/sys/class/net/" + bridgeName); err == nil {
		t.Errorf("bridge %s left behind", bridgeName)
	}
	if rules, _ := exec.Command("iptables", "-S", "FORWARD").Output(); strings.Contains(string(rules), ruleComment) {
		t.Errorf("FORWARD rules left behind:\n%s", rules)
	}
	for k, v := range before.chains {
		if got := after.chains[k]; !slices.Equal(got, v) {
			t.Errorf("%s: KUBE chains %v after, %v before", k, got, v)
		}
	}
	for k, v := range before.sysctls {
		if after.sysctls[k] != v {
			t.Errorf("sysctl %s = %s after, %s before", k, after.sysctls[k], v)
		}
	}
	for d := range after.cgroups {
		if !before.cgroups[d] {
			t.Errorf("cgroup %s left behind", d)
		}
	}
	if m := mountsUnder(state); len(m) > 0 {
		t.Errorf("mounts left under %s: %v", state, m)
	}
	for d, existed := range after.existed {
		if existed && !before.existed[d] {
			t.Errorf("%s was created and left behind", d)
		}
	}
	if out, _ := exec.Command("pgrep", "-f", state).Output(); len(out) > 0 {
		t.Errorf("processes left naming %s: %s", state, out)
	}
	if !t.Failed() {
		testenv.Record(t, "node stopped: no bridge, FORWARD rule, KUBE-* chain, kubepods cgroup, mount or process of its own left; the kubelet's sysctls restored")
	}
}

// permanentIf is a permanent error when stop holds, a retryable one otherwise.
func permanentIf(stop bool, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if stop {
		return permanent(err)
	}
	return err
}
