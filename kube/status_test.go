package kube

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ttmodel/tt-model/internal/testing/kubetest"
)

// createPod does what the StatefulSet controller would (none runs here):
// replica n's pod from the template, then the status a kubelet would
// report (none runs either).
func createPod(t *testing.T, cl *Cluster, m *Manifests, n int, status corev1.PodStatus) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	tmpl := m.StatefulSet.Spec.Template
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name + "-" + string(rune('0'+n)), Labels: tmpl.Labels, Annotations: tmpl.Annotations},
		Spec:       *tmpl.Spec.DeepCopy(),
	}
	// The claim template becomes a PVC volume per replica.
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: volCache, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: volCache + "-" + pod.Name},
	}})
	created, err := cl.core.Pods(m.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = status
	updated, err := cl.core.Pods(m.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return updated
}

// testStatusAndDelete reads an instance back from the API server: one
// replica unschedulable, one running whose supervisor the API server will
// not proxy to (a loopback pod IP), one without a pod; then deletes it.
func testStatusAndDelete(t *testing.T, srv *kubetest.Server) {
	ctx := context.Background()
	const ns = "status"
	cl := connect(t, srv, ns)
	m, err := Render(stagedPackage(t, "rf-detr", nil), Options{Registry: testRegistry, Replicas: ptr(int32(3)), Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Apply(ctx, m, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(t, cl, m, 0, corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/0 nodes are available", LastTransitionTime: metav1.Now(),
	}}})
	started := true
	createPod(t, cl, m, 1, corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "weights", Image: m.Image, ImageID: m.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "server", Image: m.Image, ImageID: m.Image, Started: &started, RestartCount: 1,
			State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 75, Reason: "Error"}},
		}},
	})

	st, err := cl.Status(ctx, ns, m.Name)
	if err != nil {
		t.Fatal(err)
	}
	if st.Replicas != 3 || st.Image != m.Image || len(st.Pods) != 3 || len(st.Services) != 2 {
		t.Fatalf("status %+v", st)
	}
	if p := st.Pods[0]; p.State != "pending" || !strings.Contains(p.Detail, "Unschedulable") || p.Supervisor != nil {
		t.Errorf("replica 0: %+v", p)
	}
	p := st.Pods[1]
	if p.State != "not ready" || p.Restarts != 1 || p.LastExit != "exit 75 (Error)" || !strings.Contains(p.SupervisorError, "address not allowed") {
		t.Errorf("replica 1: %+v", p)
	}
	if p := st.Pods[2]; p.State != "no pod" || p.Pod != "" {
		t.Errorf("replica 2: %+v", p)
	}

	deleted, err := cl.Delete(ctx, ns, m.Name, DeleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "StatefulSet/rf-detr-default Service/rf-detr-default Service/rf-detr-default-pods ConfigMap/rf-detr-default-manifest ResourceClaimTemplate/rf-detr-default-chips"
	if got := strings.Join(deleted, " "); got != want {
		t.Errorf("deleted %s, want %s", got, want)
	}
	if _, err := cl.Status(ctx, ns, m.Name); !IsNotFound(err) {
		t.Errorf("status after delete: %v", err)
	}
	if _, err := cl.Delete(ctx, ns, m.Name, DeleteOptions{}); !IsNotFound(err) {
		t.Errorf("second delete: %v", err)
	}
}
