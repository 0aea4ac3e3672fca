package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodState: what k8s status says of a replica whose supervisor cannot be
// asked, from the pod's status alone, for each way a start goes wrong.
func TestPodState(t *testing.T) {
	const image = "registry.example/ml/rf-detr@sha256:0123"
	waiting := func(name, reason, msg string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, Image: image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}
	}
	weightsFailed := corev1.ContainerStatus{Name: "weights", Image: image, RestartCount: 2,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1,
			Message: "downloading\nmodel.safetensors: sha256 abc, want def\n"}}}
	weightsOK := corev1.ContainerStatus{Name: "weights", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}
	cases := []struct {
		name        string
		init, main  []corev1.ContainerStatus
		state, want string
	}{
		{"weights image cannot be pulled", []corev1.ContainerStatus{waiting("weights", "ImagePullBackOff", `Back-off pulling image "`+image+`"`)}, nil,
			"image pull failing", "ImagePullBackOff: the node cannot pull " + image + `: Back-off pulling image "` + image + `"; push the package's image there (tt-model push PACKAGE --registry HOST/NS)`},
		{"server image cannot be pulled", []corev1.ContainerStatus{weightsOK}, []corev1.ContainerStatus{waiting("server", "ErrImagePull", "not found")},
			"image pull failing", "ErrImagePull: the node cannot pull " + image + ": not found"},
		{"weights job failed", []corev1.ContainerStatus{weightsFailed}, nil,
			"weights job failed", "exit 1 after 3 tries: downloading | model.safetensors: sha256 abc, want def (kubectl logs p-0 -c weights -n ns; the server does not start until it succeeds)"},
		{"weights job running", []corev1.ContainerStatus{{Name: "weights", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}, nil,
			"pulling weights", ""},
		{"server crash-looping", []corev1.ContainerStatus{weightsOK}, []corev1.ContainerStatus{waiting("server", "CrashLoopBackOff", "back-off 10s")},
			"waiting", "CrashLoopBackOff back-off 10s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-0", Namespace: "ns"},
				Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: tc.init, ContainerStatuses: tc.main}}
			state, detail := podState(pod, containerStatus(tc.main, "server"))
			if state != tc.state || !strings.Contains(detail, tc.want) {
				t.Errorf("state %q, detail %q; want %q and %q", state, detail, tc.state, tc.want)
			}
		})
	}
}
