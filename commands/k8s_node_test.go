package commands

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ttmodel/tt-model/hub/hubtest"
	"github.com/ttmodel/tt-model/internal/testing/kubetest"
	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
	"github.com/ttmodel/tt-model/kube"
	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/runner/runnertest"
	"github.com/ttmodel/tt-model/supervisor"
)

// TestK8sOnANode runs the packages as pods on a real single-node cluster
// (kubelet, containerd, controller manager, scheduler; internal/testing/
// kubetest), through the tt-model binary and kubectl only, as a user
// would: package → push --registry → k8s apply → Ready → requests through
// the Service (kubectl port-forward) → exit 75 inside the pod → k8s status →
// k8s delete. The weights come from a local Hub the pods reach on the
// node's bridge address, through the weights job.
func TestK8sOnANode(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "runs pods on a test node: skipped with -short")
	}
	testenv.Require(t, "kubectl")
	testenv.Require(t, "docker") // package's verify step loads the image into the engine
	node := kubetest.RunNode(t)
	e := newNodeEnv(t, node)
	t.Run("rf-detr", func(t *testing.T) { testRFDETROnANode(t, e) })
	t.Run("broken starts", func(t *testing.T) { testBrokenStartsOnANode(t, e) })
	t.Run("pi05", func(t *testing.T) { testPI05OnANode(t, e) })
	t.Run("replicas, rolling update, kubelet restart", func(t *testing.T) { testFleetOnANode(t, e) })
}

// nodeEnv is what the node tests share: the binaries, a Hub on the node's
// bridge holding the RF-DETR checkpoint at its pin, and the environment
// tt-model runs in.
type nodeEnv struct {
	node    *kubetest.Node
	root    string // the repository
	tt      string // the tt-model binary
	work    string
	hub     *hubtest.Server
	env     []string
	weights map[string][]byte // the checkpoint's files on the Hub
}

func newNodeEnv(t *testing.T, node *kubetest.Node) *nodeEnv {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tt := buildCLI(t, root)
	// The pods reach the host on the bridge address: the Hub listens there.
	hub, err := hubtest.NewOn(kubetest.BridgeIP+":0", kubetest.BridgeIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hub.Close)
	e := &nodeEnv{node: node, root: root, tt: tt, work: t.TempDir(), hub: hub, weights: map[string][]byte{}}
	files := rfdetrHubFiles(t)
	for _, f := range files {
		e.weights[f.Path] = f.Data
	}
	hub.AddCommitAt("Roboflow/rf-detr-base", "main", runnertest.RFDETRPin, files)
	e.env = append(os.Environ(), "HF_ENDPOINT="+hub.URL, "HF_HOME="+filepath.Join(e.work, "hf"), "HF_HUB_CACHE=", "HF_HUB_OFFLINE=",
		"HF_TOKEN=", "XDG_CACHE_HOME="+filepath.Join(e.work, "xdg"), "KUBECONFIG="+node.Kubeconfig)
	return e
}

// run runs tt-model (or kubectl, when args[0] is "kubectl") and fails t on
// an exit other than 0; it returns stdout and stderr together.
func (e *nodeEnv) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := e.exec(args...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (e *nodeEnv) exec(args ...string) (string, error) {
	bin := e.tt
	if args[0] == "kubectl" {
		bin, args = "kubectl", args[1:]
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = e.root, e.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// packageRFDETR packages a copy of models/rf-detr named name (edits applied)
// whose default profile exits 75 after each prediction (the server's fault
// switch), and pushes its image to the node's registry. It returns the
// package folder.
func (e *nodeEnv) packageRFDETR(t *testing.T, name string, edits ...[2]string) string {
	t.Helper()
	yaml := runnertest.EditedManifest(t, e.root, "rf-detr", append(edits, [2]string{"\nname: rf-detr\n", "\nname: " + name + "\n"})...)
	return e.packageAndPush(t, name, append(yaml, runnertest.RFDETRHangProfile()...))
}

// packageAndPush packages the manifest yaml (named name) in a folder of its
// own and pushes its image to the node's registry; it returns the package.
func (e *nodeEnv) packageAndPush(t *testing.T, name string, yaml []byte) string {
	t.Helper()
	dir, err := os.MkdirTemp(e.work, name)
	if err != nil {
		t.Fatal(err)
	}
	manifestPath := filepath.Join(dir, "tt-model.yaml")
	if err := os.WriteFile(manifestPath, yaml, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeContainersAndImages(t, name) })
	e.run(t, "package", "--container", manifestPath, "--out", filepath.Join(dir, "build"))
	pkg := filepath.Join(dir, "build", name)
	if out := e.run(t, "push", pkg, "--registry", e.node.Registry+"/tt", "--insecure", "--no-hub"); !strings.Contains(out, "@sha256:") {
		t.Fatalf("push --registry:\n%s", out)
	}
	return pkg
}

// staticPV creates a hostPath PersistentVolume of 2Gi and no class (the
// node has no provisioner), as an administrator pre-provisions storage.
func (e *nodeEnv) staticPV(t *testing.T, name string) {
	t.Helper()
	dir := filepath.Join(e.node.Dir, "pv", name)
	cacheFolder(t, dir)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
		},
	}
	if _, err := e.node.Client().CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// cacheFolder makes dir as docs/kubernetes.md asks of a volume Kubernetes
// applies no fsGroup to (host paths, hostPath PVs): group 1000, setgid,
// group-writable. The kubelet creates the sub-folders the pods mount (hf,
// cache) as root with the folder's mode, so they inherit group 1000 and
// stay writable by the pods' uid 1000 — as fsGroup arranges on volumes
// that support it.
func cacheFolder(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 0, 1000); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o775|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
}

// waitPod polls pod until cond holds, for up to timeout; on a timeout it
// fails t with the pod's status, its events and the kubelet's log.
func (e *nodeEnv) waitPod(t *testing.T, ns, pod string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		p, err := e.node.Client().CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err == nil && cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			describe, _ := e.exec("kubectl", "describe", "pod", pod, "-n", ns)
			logs, _ := e.exec("kubectl", "logs", pod, "-n", ns, "--all-containers", "--tail", "40")
			t.Fatalf("pod %s/%s: not %s after %s (get: %v)\n%s\n--- logs\n%s\n--- kubelet\n%s", ns, pod, what, timeout, err, describe, logs, e.node.Logs("kubelet"))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func serverRestarts(p *corev1.Pod) int32 {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == "server" {
			return c.RestartCount
		}
	}
	return -1
}

// portForward runs `kubectl port-forward svc/NAME :PORT` until t ends and
// returns the local base URL.
func (e *nodeEnv) portForward(t *testing.T, ns, target string, port int) string {
	t.Helper()
	cmd := exec.Command("kubectl", "port-forward", "-n", ns, target, fmt.Sprintf(":%d", port))
	cmd.Env = e.env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	re := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) ->`)
	found := make(chan string, 1)
	go func() {
		for lines.Scan() {
			if m := re.FindStringSubmatch(lines.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case p := <-found:
		return "http://127.0.0.1:" + p
	case <-time.After(30 * time.Second):
		t.Fatalf("kubectl port-forward %s: no forwarding after 30s: %s", target, errOut.String())
		return ""
	}
}

// testRFDETROnANode is the RF-DETR loop on the node.
func testRFDETROnANode(t *testing.T, e *nodeEnv) {
	const ns = "default"
	name := fmt.Sprintf("rfk8s%d", os.Getpid()%100000)
	pkg := e.packageRFDETR(t, name)
	instance := name + "-hang"
	pod := instance + "-0"
	e.staticPV(t, name+"-pv0")

	start := time.Now()
	out := e.run(t, "k8s", "apply", pkg, "--registry", e.node.Registry+"/tt", "--chips", "none", "--no-hugepages",
		"--hf-endpoint", e.hub.URL, "--cache-size", "1Gi", "--start-timeout", "5m")
	if !strings.Contains(out, "StatefulSet default/"+instance+" applied") {
		t.Fatalf("apply:\n%s", out)
	}
	ready := e.waitPod(t, ns, pod, 5*time.Minute, "Ready", podReady)
	testenv.Record(t, "pod %s Ready (image %s)", pod, ready.Spec.Containers[0].Image)
	logStartPhases(t, ready, start)

	// The weights job pulled the pinned files from the Hub into the PVC.
	logs := e.run(t, "kubectl", "logs", pod, "-c", "weights")
	if !strings.Contains(logs, runnertest.RFDETRPin) {
		t.Errorf("weights job output does not name the pinned revision:\n%s", logs)
	}

	// /predict through the Service, then the same request to the same
	// package served on this host: the same detections.
	base := e.portForward(t, ns, "svc/"+instance, 8000)
	inPod, err := runnertest.PredictRFDETRDetections(base + "/predict")
	if err != nil {
		t.Fatalf("/predict through the Service: %v", err)
	}

	// The profile's fault switch made the server exit 75 after that
	// prediction: the supervisor (PID 1) resets and restarts it inside the
	// pod, so the pod becomes Ready again without a container restart.
	predicted := time.Now()
	e.waitPod(t, ns, pod, 3*time.Minute, "restarted by its supervisor and Ready", func(p *corev1.Pod) bool {
		starts, state := supervisorState(e, instance)
		return podReady(p) && starts >= 2 && state == "ready"
	})
	testenv.Record(t, "timing: exit 75 → Ready again in the pod: %.1fs (its supervisor ready again, polled every 0.5s)", time.Since(predicted).Seconds())
	p := e.waitPod(t, ns, pod, time.Second, "Ready", podReady)
	if r := serverRestarts(p); r != 0 {
		t.Errorf("the server container restarted %d times: the supervisor should have handled the exit 75 inside it", r)
	}
	status := e.run(t, "k8s", "status", instance)
	if !strings.Contains(status, instance+" in namespace default: 1/1 replicas ready") || !regexp.MustCompile(`(?m)^0\s+`+pod+`\s+Running\s+true\s+0\s+ready\s+supervisor`).MatchString(status) {
		t.Errorf("k8s status:\n%s", status)
	}

	host := hostPredict(t, e, pkg, name)
	if !bytes.Equal(inPod, host) {
		t.Errorf("detections differ:\n pod  %s\n host %s", inPod, host)
	}

	out = e.run(t, "k8s", "delete", instance)
	if !strings.Contains(out, "StatefulSet/"+instance+" deleted") {
		t.Errorf("delete:\n%s", out)
	}
	e.waitGone(t, ns, pod, 2*time.Minute)
	claim := "cache-" + pod
	ctx := context.Background()
	if _, err := e.node.Client().CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{}); err != nil {
		t.Errorf("the cache PVC %s after k8s delete without --volumes: %v", claim, err)
	}
	out = e.run(t, "k8s", "delete", instance, "--volumes")
	if !strings.Contains(out, "PersistentVolumeClaim/"+claim+" deleted") {
		t.Errorf("delete --volumes:\n%s", out)
	}
	if !t.Failed() {
		testenv.Record(t, "%s: /predict through the Service equal to serve --host; exit 75 handled inside the pod (restartCount 0); delete kept the PVC, --volumes removed it", instance)
	}
}

// waitGone polls until pod no longer exists.
func (e *nodeEnv) waitGone(t *testing.T, ns, pod string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		_, err := e.node.Client().CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s/%s still there %s after delete (%v)", ns, pod, timeout, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// supervisorState is replica 0's supervisor's count of server starts and
// its state, from k8s status --json (0 and "" when it cannot be read).
func supervisorState(e *nodeEnv, instance string) (starts int, state string) {
	out, err := e.exec("k8s", "status", instance, "--json")
	if err != nil {
		return 0, ""
	}
	var st kube.Status
	if json.Unmarshal([]byte(out), &st) != nil || len(st.Pods) == 0 || st.Pods[0].Supervisor == nil {
		return 0, ""
	}
	return st.Pods[0].Supervisor.Starts, st.Pods[0].State
}

// hostPredict serves pkg on this host (tt-model serve --host), sends it the
// same request and returns its detections; the server then exits 75 as in
// the pod, and is stopped.
func hostPredict(t *testing.T, e *nodeEnv, pkg, name string) []byte {
	t.Helper()
	port := strconv.Itoa(servertest.FreePort(t))
	out := e.run(t, "serve", pkg, "--host", "--port", port, "--timeout", "5m")
	if !strings.Contains(out, name+" is ready") {
		t.Fatalf("serve --host:\n%s", out)
	}
	defer e.run(t, "stop", name)
	base := "http://127.0.0.1:" + port
	det, err := runnertest.PredictRFDETRDetections(base + "/predict")
	if err != nil {
		t.Fatalf("/predict on the host: %v", err)
	}
	predicted := time.Now()
	// The server exits 75 after that prediction; its supervisor resets and
	// restarts it: /health goes down, then answers ok again.
	down := false
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		ok := healthOK(base + "/health")
		if !ok {
			down = true
		}
		if ok && down {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the host server did not come back after its exit 75 (down seen: %v)", down)
		}
	}
	testenv.Record(t, "timing: exit 75 → Ready again on the host (tt-model serve --host): %.1fs (polled every 0.1s)", time.Since(predicted).Seconds())
	return det
}

// logStartPhases logs where apply → Ready went, from the pod's own
// timestamps (whole seconds): scheduling and the image pull until the
// weights job started, the job, and the server's start until Ready.
func logStartPhases(t *testing.T, p *corev1.Pod, applied time.Time) {
	t.Helper()
	var jobStart, jobEnd, serverStart, readyAt time.Time
	for _, c := range p.Status.InitContainerStatuses {
		if c.Name == "weights" && c.State.Terminated != nil {
			jobStart, jobEnd = c.State.Terminated.StartedAt.Time, c.State.Terminated.FinishedAt.Time
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == "server" && c.State.Running != nil {
			serverStart = c.State.Running.StartedAt.Time
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			readyAt = c.LastTransitionTime.Time
		}
	}
	testenv.Record(t, "timing: apply → Ready %.1fs: apply → weights job start (scheduling, image pull) %s, weights job %s, server start → Ready %s",
		time.Since(applied).Seconds(), jobStart.Sub(applied).Round(time.Second),
		jobEnd.Sub(jobStart), readyAt.Sub(serverStart))
}

// testBrokenStartsOnANode: the two ways a start fails before the server
// runs, each named by k8s status with what to do: an image the node cannot
// pull (never pushed to the registry the objects name), and a weights job
// whose download does not match its sha256 (a Hub serving corrupt bytes),
// after which the server never starts. Both keep their caches on a host
// path (--cache-host-path) instead of a PVC.
func testBrokenStartsOnANode(t *testing.T, e *nodeEnv) {
	const ns = "default"
	name := fmt.Sprintf("rfbad%d", os.Getpid()%100000)
	pkg := e.packageRFDETR(t, name)
	cache := filepath.Join(e.node.Dir, "hostcache-"+name)
	cacheFolder(t, cache)
	common := []string{"--chips", "none", "--no-hugepages", "--cache-host-path", cache}

	t.Run("image not in the registry", func(t *testing.T) {
		instance := name + "-nopull"
		e.run(t, append([]string{"k8s", "apply", pkg, "--name", instance, "--registry", e.node.Registry + "/elsewhere", "--hf-endpoint", e.hub.URL}, common...)...)
		defer e.run(t, "k8s", "delete", instance)
		status := waitStatus(t, e, instance, "image pull failing")
		for _, want := range []string{"the node cannot pull " + e.node.Registry + "/elsewhere/" + name + "@sha256:", "tt-model push PACKAGE --registry HOST/NS"} {
			if !strings.Contains(status, want) {
				t.Errorf("k8s status lacks %q:\n%s", want, status)
			}
		}
	})

	t.Run("weights that fail their sha256", func(t *testing.T) {
		bad, err := hubtest.NewOn(kubetest.BridgeIP+":0", kubetest.BridgeIP+":0")
		if err != nil {
			t.Fatal(err)
		}
		defer bad.Close()
		bad.AddCommitAt("Roboflow/rf-detr-base", "main", runnertest.RFDETRPin, []hubtest.File{
			{Path: "config.json", Data: e.weights["config.json"]},
			{Path: "model.safetensors", Data: e.weights["model.safetensors"], LFS: true},
		})
		bad.Corrupt(true)
		instance := name + "-badsha"
		e.run(t, append([]string{"k8s", "apply", pkg, "--name", instance, "--registry", e.node.Registry + "/tt", "--hf-endpoint", bad.URL}, common...)...)
		defer e.run(t, "k8s", "delete", instance)
		status := waitStatus(t, e, instance, "weights job failed")
		if !strings.Contains(status, "model.safetensors") || !strings.Contains(status, "kubectl logs "+instance+"-0 -c weights") {
			t.Errorf("k8s status does not name the file and the logs:\n%s", status)
		}
		p, err := e.node.Client().CoreV1().Pods(ns).Get(context.Background(), instance+"-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.Name == "server" && (c.State.Running != nil || c.State.Terminated != nil || c.RestartCount > 0) {
				t.Errorf("the server started although its weights failed: %+v", c.State)
			}
		}
	})
}

// waitStatus polls `k8s status instance` until its replica 0 is in state,
// for up to three minutes, and returns the output.
func waitStatus(t *testing.T, e *nodeEnv, instance, state string) string {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		out, _ := e.exec("k8s", "status", instance)
		if strings.Contains(out, " "+state+" ") {
			return out
		}
		if time.Now().After(deadline) {
			describe, _ := e.exec("kubectl", "describe", "pod", instance+"-0")
			t.Fatalf("k8s status %s: not %q after 3m:\n%s\n%s", instance, state, out, describe)
		}
		time.Sleep(time.Second)
	}
}

// testPI05OnANode serves pi0.5 (the tiny test checkpoint, its weights pulled
// from the Hub by the weights job) with the multi-robot profile on the node:
// Ready, /health, SGLang's /v1/actions/generations through the Service
// within the golden's tolerance of PyTorch's answer to the same request,
// and the robot clients of every protocol (the OpenPI websocket included)
// through the Service agreeing with it bit for bit.
func testPI05OnANode(t *testing.T, e *nodeEnv) {
	const ns = "default"
	name := fmt.Sprintf("pi05k8s%d", os.Getpid()%100000)
	var files []hubtest.File
	for src, dst := range map[string]string{
		"kernels/pi05/testdata/tiny/model.safetensors": "model.safetensors",
		"kernels/pi05/testdata/tiny/config.json":       "config.json",
		"models/pi05/spm/testdata/bpe_tiny.model":      "tokenizer.model",
	} {
		b, err := os.ReadFile(filepath.Join(e.root, src))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, hubtest.File{Path: dst, Data: b, LFS: strings.HasSuffix(dst, ".safetensors") || strings.HasSuffix(dst, ".model")})
	}
	e.hub.AddCommitAt("lerobot/pi05_base", "main", runnertest.PI05Pin, files)

	// The multi-robot profile as shipped, but for its SLO (runnertest.PI05TestSLO),
	// and the same with the fault switch hanging device 1's first call.
	hangProfile := "serve_profiles:\n  - name: multi-robot-hang\n    description: test only; device 1's first call hangs\n" +
		"    env:\n      PI05_LAYOUT: dp\n      PI05_SLO_MS: \"2000\"\n      PI05_SLO_P99_MS: \"2200\"\n" +
		"      TT_MODEL_FAULT: \"hang:device=1,after=1\"\n"
	yaml := runnertest.EditedManifest(t, e.root, "pi05", append([][2]string{{"\nname: pi05\n", "\nname: " + name + "\n"},
		{"serve_profiles:\n", hangProfile}}, runnertest.PI05TestSLO[:]...)...)
	pkg := e.packageAndPush(t, name, yaml)
	e.staticPV(t, name+"-pv0")

	instance := name + "-multi-robot"
	pod := instance + "-0"
	start := time.Now()
	// The profile's four CPU devices share the node's two cores: a request
	// of one CPU lets the pod be scheduled beside the others.
	e.run(t, "k8s", "apply", pkg, "--profile", "multi-robot", "--registry", e.node.Registry+"/tt", "--chips", "none", "--no-hugepages",
		"--hf-endpoint", e.hub.URL, "--cache-size", "1Gi", "--cpu", "1", "--memory", "6Gi", "--start-timeout", "5m")
	defer e.exec("k8s", "delete", instance, "--volumes")
	ready := e.waitPod(t, ns, pod, 5*time.Minute, "Ready", podReady)
	testenv.Record(t, "pod %s Ready (image %s)", pod, ready.Spec.Containers[0].Image)
	logStartPhases(t, ready, start)
	t.Run("hang on one device", func(t *testing.T) { testPI05HangOnANode(t, e, pkg, name) })

	base := e.portForward(t, ns, "svc/"+instance, 8000)
	if !healthOK(base + "/health") {
		t.Errorf("/health through the Service is not ok")
	}
	got, want := generations(t, base)
	if len(got) != len(want) || len(got) == 0 || len(got[0]) != len(want[0]) {
		t.Fatalf("actions %dx?, golden %dx%d", len(got), len(want), len(want[0]))
	}
	worst := 0.0
	for r := range want {
		for c := range want[r] {
			if d := math.Abs(got[r][c] - want[r][c]); d > worst || math.IsNaN(d) {
				worst = d
			}
		}
	}
	if !(worst <= runnertest.PI05GoldenTolerance) {
		t.Errorf("/v1/actions/generations through the Service differs from the golden by %g, want <= %g", worst, runnertest.PI05GoldenTolerance)
	}

	// The robot clients of every protocol (OpenPI's websocket with its
	// metadata and error close, the realtime websocket, msgpack over HTTP),
	// written from the protocol descriptions, through the same Service: each
	// must get the JSON API's actions bit for bit.
	testenv.Require(t, "python3-msgpack")
	testenv.Require(t, "python3-websockets")
	clients := exec.Command(testenv.Python, filepath.Join(e.root, "server", "pi05", "testdata", "robot_clients.py"), base, "50")
	out, err := clients.CombinedOutput()
	if err != nil {
		t.Errorf("robot_clients.py through the Service: %v\n%s", err, out)
	} else if !strings.Contains(string(out), "openpi libero") {
		t.Errorf("robot_clients.py ran no OpenPI check:\n%s", out)
	}
}

// goldenRequest is the pi0.5 golden request (runner/testdata) as the body
// of SGLang's action API, and the golden's actions (PyTorch's bf16 answer).
func goldenRequest(t *testing.T) (body []byte, want [][]float64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "runner", "testdata", "pi05", "request_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Request struct {
			Images   []json.RawMessage `json:"images"`
			Tokens   json.RawMessage   `json:"tokens"`
			Noise    json.RawMessage   `json:"noise"`
			NumSteps int               `json:"num_steps"`
		} `json:"request"`
		ActionsBF16 [][]float64 `json:"actions_bf16"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	images := map[string]json.RawMessage{}
	for i, img := range g.Request.Images {
		images[fmt.Sprintf("cam%d", i)] = img
	}
	body, err = json.Marshal(map[string]any{
		"model":      "lerobot/pi05_base",
		"input":      map[string]any{"tokens": g.Request.Tokens, "observation": map[string]any{"images": images, "noise": g.Request.Noise}},
		"parameters": map[string]any{"num_inference_steps": g.Request.NumSteps},
	})
	if err != nil {
		t.Fatal(err)
	}
	return body, g.ActionsBF16
}

// postGenerations POSTs body to base's /v1/actions/generations as robot
// ("" = none) and returns the status and the answer.
func postGenerations(base, robot string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/actions/generations", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if robot != "" {
		req.Header.Set("X-Robot-Id", robot)
	}
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// generations sends the golden request to base and returns the answer's
// actions and the golden's.
func generations(t *testing.T, base string) (got, want [][]float64) {
	t.Helper()
	body, want := goldenRequest(t)
	code, out, err := postGenerations(base, "", body)
	var answer struct {
		Data []struct {
			Action struct {
				Values [][]float64 `json:"values"`
			} `json:"action"`
		} `json:"data"`
	}
	if err != nil || code != http.StatusOK || json.Unmarshal(out, &answer) != nil || len(answer.Data) != 1 {
		t.Fatalf("/v1/actions/generations at %s: %v, HTTP %d: %.500s", base, err, code, out)
	}
	return answer.Data[0].Action.Values, want
}

// testFleetOnANode: two replicas, each with its own PVC (static PVs) and so
// its own hang marker; a rolling update to a re-packaged image (a new
// digest) that keeps both caches (the weights job finds the pin complete:
// no download from the Hub); and a node restart (the kubelet stopped and
// started) after which both pods are Ready again without a container
// restart.
func testFleetOnANode(t *testing.T, e *nodeEnv) {
	const ns = "default"
	ctx := context.Background()
	name := fmt.Sprintf("rffleet%d", os.Getpid()%100000)
	instance := name + "-hang"
	pkg := e.packageRFDETR(t, name)
	for i := range 2 {
		e.staticPV(t, fmt.Sprintf("%s-pv%d", name, i))
	}
	apply := func(pkg string) {
		e.run(t, "k8s", "apply", pkg, "--replicas", "2", "--registry", e.node.Registry+"/tt", "--chips", "none", "--no-hugepages",
			"--hf-endpoint", e.hub.URL, "--cache-size", "1Gi", "--cpu", "500m", "--start-timeout", "5m")
	}
	apply(pkg)
	defer e.run(t, "k8s", "delete", instance, "--volumes")
	pods := []string{instance + "-0", instance + "-1"}
	for _, p := range pods {
		e.waitPod(t, ns, p, 5*time.Minute, "Ready", podReady)
	}
	claims := map[string]string{} // claim → its UID
	volumes := map[string]bool{}
	for _, p := range pods {
		c, err := e.node.Client().CoreV1().PersistentVolumeClaims(ns).Get(ctx, "cache-"+p, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claims[c.Name], volumes[c.Spec.VolumeName] = string(c.UID), true
	}
	if len(volumes) != 2 {
		t.Fatalf("the two replicas' claims are bound to %v, want two volumes", volumes)
	}
	var st kube.Status
	if err := json.Unmarshal([]byte(e.run(t, "k8s", "status", instance, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Pods {
		if r.Supervisor == nil || r.Supervisor.HangMarker == nil || r.Supervisor.HangMarker.Path != "/cache/hang_marker" {
			t.Errorf("replica %d: supervisor %+v, want the hang marker on its own /cache", r.Ordinal, r.Supervisor)
		}
	}
	downloads := func() int {
		n := 0
		for _, r := range e.hub.Requests() {
			if r.Host == "storage" && r.Method == http.MethodGet {
				n++
			}
		}
		return n
	}
	before := downloads()

	// A re-packaged image: its card changed, so its digest did.
	pkg2 := e.packageRFDETR(t, name, [2]string{"one image in, scored boxes out", "one image in, scored boxes out (v2)"})
	w1, w2 := readWire(t, pkg), readWire(t, pkg2)
	if w1 == w2 {
		t.Fatalf("the re-packaged image has the same digest %s", w1)
	}
	e.run(t, "push", pkg2, "--registry", e.node.Registry+"/tt", "--insecure", "--no-hub")
	apply(pkg2)
	for _, p := range pods {
		e.waitPod(t, ns, p, 5*time.Minute, "Ready on the new image", func(pod *corev1.Pod) bool {
			return podReady(pod) && strings.HasSuffix(pod.Spec.Containers[0].Image, "@"+w2)
		})
	}
	for claim, uid := range claims {
		c, err := e.node.Client().CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
		if err != nil || string(c.UID) != uid {
			t.Errorf("claim %s after the rolling update: %v (uid %v, was %s)", claim, err, c.UID, uid)
		}
	}
	if n := downloads() - before; n != 0 {
		t.Errorf("the rolling update downloaded %d files from the Hub: the weights job should have found them in the kept caches", n)
	}

	e.node.StopKubelet()
	time.Sleep(3 * time.Second)
	if err := e.node.StartKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		pod := e.waitPod(t, ns, p, 3*time.Minute, "Ready after the kubelet restart", podReady)
		if r := serverRestarts(pod); r != 0 {
			t.Errorf("%s: the server container restarted %d times across the kubelet restart", p, r)
		}
	}
	if !t.Failed() {
		testenv.Record(t, "%s: 2 replicas on their own claims rolled from %s to %s with the caches kept (no Hub download), Ready again after a kubelet restart", instance, w1[:19], w2[:19])
	}
}

// readWire is the image digest of the package at dir.
func readWire(t *testing.T, dir string) string {
	t.Helper()
	w, err := manifest.ReadWire(dir)
	if err != nil {
		t.Fatal(err)
	}
	return w.Container.Image.Digest
}

// testPI05HangOnANode: the fault switch hangs device 1's first call in a
// multi-robot pod; the watchdog quarantines it: the robot's request fails,
// /health through the Service says degraded, and the pod stays Ready (its
// readiness probe takes degraded). The hang marker the server wrote is on
// the PVC: after the container is killed (the kubelet restarts it), the
// new supervisor finds the marker and runs the reset before the start.
func testPI05HangOnANode(t *testing.T, e *nodeEnv, pkg, name string) {
	const ns = "default"
	ctx := context.Background()
	instance := name + "-multi-robot-hang"
	pod := instance + "-0"
	e.staticPV(t, name+"-pv-hang")
	// A reset command of the site's own runs without chips (the default,
	// tt-smi, is skipped there): the image's tt-model stands in for it.
	e.run(t, "k8s", "apply", pkg, "--profile", "multi-robot-hang", "--registry", e.node.Registry+"/tt", "--chips", "none", "--no-hugepages",
		"--hf-endpoint", e.hub.URL, "--cache-size", "1Gi", "--cpu", "1", "--memory", "6Gi", "--start-timeout", "5m",
		"--reset-cmd", "/usr/local/bin/tt-model --version")
	defer e.exec("k8s", "delete", instance, "--volumes")
	e.waitPod(t, ns, pod, 5*time.Minute, "Ready", podReady)
	base := e.portForward(t, ns, "svc/"+instance, 8000)

	// Robots bind to devices in turn: one of the four lands on device 1.
	body, _ := goldenRequest(t)
	failed := 0
	for i := range 4 {
		if code, _, err := postGenerations(base, fmt.Sprintf("robot-%d", i), body); err != nil || code != http.StatusOK {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("%d of 4 robots' requests failed, want the one on the hung device", failed)
	}
	var h struct {
		Status string `json:"status"`
	}
	if code := getJSONStatus(t, base+"/health", &h); code != http.StatusOK || h.Status != "degraded" {
		t.Fatalf("/health through the Service: HTTP %d %q, want 200 degraded", code, h.Status)
	}
	// Three readiness periods: a probe that dropped degraded would have
	// taken the pod out by now.
	time.Sleep(35 * time.Second)
	p := e.waitPod(t, ns, pod, time.Second, "still Ready while degraded", podReady)
	marker := hangMarkerOf(t, e, instance)
	if marker == nil || !marker.Present {
		t.Fatalf("hang marker %+v, want it present on the PVC", marker)
	}

	var id string
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == "server" {
			id = c.ContainerID
		}
	}
	if err := e.node.KillContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	p = e.waitPod(t, ns, pod, 5*time.Minute, "restarted by the kubelet and Ready", func(p *corev1.Pod) bool {
		return podReady(p) && serverRestarts(p) == 1
	})
	var st kube.Status
	if err := json.Unmarshal([]byte(e.run(t, "k8s", "status", instance, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if r := st.Pods[0]; r.Restarts != 1 || !strings.HasPrefix(r.LastExit, "exit 137") || !r.Ready || r.State != "ready" {
		t.Errorf("k8s status after the kill: restarts %d, last exit %q, ready %v, state %q; want 1, exit 137 (SIGKILL), true, ready", r.Restarts, r.LastExit, r.Ready, r.State)
	}
	sup := st.Pods[0].Supervisor
	if sup == nil || sup.LastReset == nil || !strings.Contains(sup.LastReset.Reason, "hang marker") || !sup.LastReset.OK || sup.LastReset.Skipped ||
		sup.HangMarker == nil || sup.HangMarker.Present {
		t.Errorf("after the restart the supervisor should have reset for the marker and removed it: %+v", sup)
	}
	if !t.Failed() {
		testenv.Record(t, "pod %s: device 1 hung, /health degraded, still Ready; after the container was killed the supervisor reset for the hang marker on its PVC (%s)", pod, sup.LastReset.Reason)
	}
}

// getJSONStatus GETs url into out and returns the HTTP status.
func getJSONStatus(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(out)
	return resp.StatusCode
}

// hangMarkerOf is replica 0's hang marker as its supervisor reports it.
func hangMarkerOf(t *testing.T, e *nodeEnv, instance string) *supervisor.MarkerStatus {
	t.Helper()
	var st kube.Status
	if err := json.Unmarshal([]byte(e.run(t, "k8s", "status", instance, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Pods) == 0 || st.Pods[0].Supervisor == nil {
		return nil
	}
	return st.Pods[0].Supervisor.HangMarker
}
