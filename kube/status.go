package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ttmodel/tt-model/supervisor"
)

// Status is an instance as the API server knows it, one entry per replica.
type Status struct {
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	Image     string          `json:"image"`
	Replicas  int32           `json:"replicas"` // desired
	Ready     int32           `json:"ready"`
	Services  []string        `json:"services"`
	Pods      []ReplicaStatus `json:"replicas_status"`
}

// ReplicaStatus is one replica: its pod and its supervisor's state.
type ReplicaStatus struct {
	Ordinal  int    `json:"ordinal"`
	Pod      string `json:"pod"` // "" when the replica has no pod (yet)
	Phase    string `json:"phase,omitempty"`
	Node     string `json:"node,omitempty"`
	Ready    bool   `json:"ready"`
	Restarts int32  `json:"restarts"`
	// LastExit is the server container's last exit, e.g. "exit 75
	// (Error)"; the supervisor gives up with the server's code.
	LastExit string `json:"last_exit,omitempty"`

	// State is the supervisor's state (starting, ready, resetting,
	// backoff, stopping, failed) when Supervisor is set, else what the
	// pod's status says (pending, pulling weights, starting, not ready, …).
	State  string `json:"state"`
	Detail string `json:"detail,omitempty"`
	// Supervisor is the status JSON its supervisor served, read through
	// the API server's pod proxy; nil when that failed (SupervisorError).
	Supervisor      *supervisor.Status `json:"supervisor,omitempty"`
	SupervisorError string             `json:"supervisor_error,omitempty"`
}

// Status reads the StatefulSet of instance name, its pods and, through the
// API server's pod proxy, each replica's supervisor status.
func (c *Cluster) Status(ctx context.Context, namespace, name string) (*Status, error) {
	ns := c.namespaceFor(namespace)
	sts, err := c.apps.StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, &NotFoundError{Name: name, Namespace: ns}
	}
	if err != nil {
		return nil, fmt.Errorf("get StatefulSet %s/%s: %w", ns, name, err)
	}
	st := &Status{Name: name, Namespace: ns, Ready: sts.Status.ReadyReplicas}
	if sts.Spec.Replicas != nil {
		st.Replicas = *sts.Spec.Replicas
	}
	if cs := sts.Spec.Template.Spec.Containers; len(cs) > 0 {
		st.Image = cs[0].Image
	}
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("StatefulSet %s/%s selector: %w", ns, name, err)
	}
	svcs, err := c.core.Services(ns).List(ctx, metav1.ListOptions{LabelSelector: labelInstance + "=" + name})
	if err != nil {
		return nil, fmt.Errorf("list Services of %s/%s: %w", ns, name, err)
	}
	for _, s := range svcs.Items {
		st.Services = append(st.Services, s.Name)
	}
	pods, err := c.core.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("list pods of %s/%s: %w", ns, name, err)
	}
	byOrdinal := map[int]*corev1.Pod{}
	for i := range pods.Items {
		if n, ok := ordinal(name, pods.Items[i].Name); ok {
			byOrdinal[n] = &pods.Items[i]
		}
	}
	count := int(st.Replicas)
	for n := range byOrdinal {
		count = max(count, n+1) // a replica scaled away that still terminates
	}
	for n := range count {
		r := ReplicaStatus{Ordinal: n}
		if pod := byOrdinal[n]; pod != nil {
			r = c.replica(ctx, n, pod)
		} else {
			r.State = "no pod"
		}
		st.Pods = append(st.Pods, r)
	}
	return st, nil
}

// ordinal reads N from a StatefulSet pod name <set>-N.
func ordinal(set, pod string) (int, bool) {
	rest, ok := strings.CutPrefix(pod, set+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}

// replica is one pod's status: its supervisor's own when the pod proxy
// reaches it, else what the pod's conditions and container statuses say.
func (c *Cluster) replica(ctx context.Context, n int, pod *corev1.Pod) ReplicaStatus {
	r := ReplicaStatus{Ordinal: n, Pod: pod.Name, Phase: string(pod.Status.Phase), Node: pod.Spec.NodeName}
	server := containerStatus(pod.Status.ContainerStatuses, "server")
	if server != nil {
		r.Ready = server.Ready
		r.Restarts = server.RestartCount
		if t := server.LastTerminationState.Terminated; t != nil {
			r.LastExit = fmt.Sprintf("exit %d (%s)", t.ExitCode, t.Reason)
		}
	}
	sup, err := c.supervisorStatus(ctx, pod)
	if err == nil {
		r.Supervisor = sup
		r.State, r.Detail = sup.State.String(), sup.Detail
		return r
	}
	r.SupervisorError = err.Error()
	r.State, r.Detail = podState(pod, server)
	return r
}

// supervisorStatus GETs the supervisor's /status through the API server's
// pod proxy (the pods/proxy subresource, the same path as `kubectl get
// --raw /api/v1/namespaces/NS/pods/POD:PORT/proxy/status`).
func (c *Cluster) supervisorStatus(ctx context.Context, pod *corev1.Pod) (*supervisor.Status, error) {
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return nil, fmt.Errorf("pod %s is %s without an IP: no supervisor to ask", pod.Name, orDash(string(pod.Status.Phase)))
	}
	port := statusPort(pod)
	if port == 0 {
		return nil, fmt.Errorf("pod %s declares no %q port", pod.Name, portStatus)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res := c.core.RESTClient().Get().Namespace(pod.Namespace).Resource("pods").
		Name("http:" + pod.Name + ":" + strconv.Itoa(int(port))).SubResource("proxy").Suffix("status").Do(ctx)
	body, err := res.Raw()
	if err != nil {
		// Error (unlike Raw) reads the API server's Status out of the body.
		return nil, fmt.Errorf("supervisor status of %s: %w", pod.Name, res.Error())
	}
	var st supervisor.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("supervisor status of %s: %w", pod.Name, err)
	}
	return &st, nil
}

func statusPort(pod *corev1.Pod) int32 {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == portStatus {
				return p.ContainerPort
			}
		}
	}
	return 0
}

func containerStatus(list []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	i := slices.IndexFunc(list, func(s corev1.ContainerStatus) bool { return s.Name == name })
	if i < 0 {
		return nil
	}
	return &list[i]
}

// podState is the replica's state as the pod's status tells it, when its
// supervisor cannot be asked.
func podState(pod *corev1.Pod, server *corev1.ContainerStatus) (state, detail string) {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
			return "pending", strings.TrimSpace("not scheduled: " + cond.Reason + " " + cond.Message)
		}
	}
	if w := containerStatus(pod.Status.InitContainerStatuses, "weights"); w != nil && !weightsDone(w) {
		return weightsState(pod, w)
	}
	switch {
	case server == nil:
		return strings.ToLower(orDash(string(pod.Status.Phase))), "no container status yet"
	case server.State.Waiting != nil && imagePullFailing(server.State.Waiting.Reason):
		return "image pull failing", imagePullDetail(pod, server)
	case server.State.Waiting != nil:
		return "waiting", server.State.Waiting.Reason + " " + server.State.Waiting.Message
	case server.State.Terminated != nil:
		return "exited", fmt.Sprintf("exit %d (%s)", server.State.Terminated.ExitCode, server.State.Terminated.Reason)
	case server.Ready:
		return "ready", ""
	case server.Started != nil && *server.Started:
		return "not ready", "started (its supervisor answered the startup probe), but the server's /health does not say ok: starting, restarting or resetting"
	}
	return "starting", ""
}

// weightsDone: the weights job has exited 0 (the server may start).
func weightsDone(w *corev1.ContainerStatus) bool {
	return w.State.Terminated != nil && w.State.Terminated.ExitCode == 0
}

// weightsState says why the weights job has not finished: its image cannot
// be pulled, it failed (the end of its output, which names the file, and
// the command to read the rest), or it is pulling.
func weightsState(pod *corev1.Pod, w *corev1.ContainerStatus) (state, detail string) {
	if w.State.Waiting != nil && imagePullFailing(w.State.Waiting.Reason) {
		return "image pull failing", imagePullDetail(pod, w)
	}
	failed := w.State.Terminated
	if failed == nil && w.LastTerminationState.Terminated != nil && w.LastTerminationState.Terminated.ExitCode != 0 {
		failed = w.LastTerminationState.Terminated // in back-off before the next try
	}
	if failed != nil {
		msg := lastLines(failed.Message, 3)
		return "weights job failed", fmt.Sprintf("exit %d after %d tries: %s (kubectl logs %s -c weights -n %s; the server does not start until it succeeds)",
			failed.ExitCode, w.RestartCount+1, orDash(msg), pod.Name, pod.Namespace)
	}
	if w.State.Waiting != nil {
		return "pulling weights", w.State.Waiting.Reason
	}
	return "pulling weights", ""
}

// imagePullFailing: the kubelet's reasons for an image it cannot pull.
func imagePullFailing(reason string) bool {
	switch reason {
	case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
		return true
	}
	return false
}

// imagePullDetail names the image, the kubelet's reason and what to do.
func imagePullDetail(pod *corev1.Pod, c *corev1.ContainerStatus) string {
	return fmt.Sprintf("%s: the node cannot pull %s: %s; push the package's image there (tt-model push PACKAGE --registry HOST/NS) and apply with the same --registry, or give the pods an imagePullSecret for a private registry (kubectl describe pod %s -n %s)",
		c.State.Waiting.Reason, c.Image, orDash(lastLines(c.State.Waiting.Message, 2)), pod.Name, pod.Namespace)
}

// lastLines is the last n non-empty lines of s, joined by " | ".
func lastLines(s string, n int) string {
	var lines []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
