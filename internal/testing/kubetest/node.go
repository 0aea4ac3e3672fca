package kubetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ttmodel/tt-model/internal/testing/kubebin"
)

// The node's fixed names and addresses. One node runs per machine at a time
// (lockFile), so fixed names are safe and teardown can tell what is its own.
const (
	// NodeName is the Node object the kubelet registers.
	NodeName = "tt-kubetest"
	// BridgeIP is the host's address on the pod network: the node's
	// InternalIP, and where pods reach a server the test runs on the host
	// (a Hub, say) when it listens there.
	BridgeIP   = "10.244.0.1"
	bridgeName = "ttkbr0"
	podSubnet  = "10.244.0.0/24"
	cniNetwork = "ttknet"
	// ruleComment tags the FORWARD rules the node adds.
	ruleComment = "tt-kubetest"
	// lockFile, in the binaries' folder (the cache scripts/kube-apiserver.sh
	// fills), serialises nodes: test binaries of several packages run at once.
	lockFile = ".node.lock"
	// lockWait bounds the wait for another test's node to finish.
	lockWait = 30 * time.Minute
	// nodeReadyTimeout bounds the kubelet's registration (about 5 s idle).
	nodeReadyTimeout = 3 * time.Minute
)

// Node is a single-node cluster that runs real pods: the control plane
// (etcd, kube-apiserver), kube-controller-manager, kube-scheduler, a
// containerd of its own (sockets, images and state under Dir), a kubelet,
// and a docker-registry the node pulls from over plain HTTP. Pods get
// addresses on a bridge of their own (ttkbr0, 10.244.0.0/24); no kube-proxy
// or cluster DNS runs, so a Service is reached through `kubectl
// port-forward`. Every change to the host is recorded at start and undone by
// Stop (hostchanges.go).
type Node struct {
	*Server
	// Registry is the node's registry, 127.0.0.1:PORT: push images there and
	// name them so in pods.
	Registry string

	bins     kubebin.NodeBinaries
	runtime  procGroup // registry and containerd: started first, stopped last
	sock     string    // containerd's socket
	host     *hostState
	lock     *os.File
	kubelet  []string // the kubelet's argv, to restart it
	clientse *kubernetes.Clientset
}

// StartNode starts a node with its state under dir (keep the path short:
// containerd's sockets live there) and returns once the Node is Ready.
// binDir holds the Kubernetes binaries (kubebin.Dir). It waits while another
// process's node runs.
func StartNode(ctx context.Context, binDir, dir string, bins kubebin.NodeBinaries) (n *Node, err error) {
	n = &Node{bins: bins, runtime: procGroup{dir: dir}, sock: filepath.Join(dir, "containerd", "containerd.sock")}
	if n.lock, err = lockMachine(ctx, filepath.Join(binDir, lockFile)); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			n.Stop()
		}
	}()
	if n.host, err = recordHost(dir); err != nil {
		return n, err
	}
	if err := n.host.addPodNetwork(); err != nil {
		return n, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return n, err
	}
	n.Registry = "127.0.0.1:" + strconv.Itoa(ports[0])
	if err := writeNodeConfig(dir, n.sock, n.Registry); err != nil {
		return n, err
	}
	if err := n.startRuntime(ctx); err != nil {
		return n, err
	}
	if n.Server, err = Start(ctx, binDir, dir); err != nil {
		return n, err
	}
	if n.clientse, err = n.client(); err != nil {
		return n, err
	}
	if err := n.startControllers(); err != nil {
		return n, err
	}
	if err := n.StartKubelet(ctx); err != nil {
		return n, err
	}
	return n, nil
}

// lockMachine takes the machine-wide node lock, waiting for another node
// (another test binary's) to stop.
func lockMachine(ctx context.Context, lockPath string) (*os.File, error) {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("node lock: %w", err)
	}
	deadline := time.Now().Add(lockWait)
	for {
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			return f, nil
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("another test node has held %s for %s", lockPath, lockWait)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// startRuntime starts the registry (at n.Registry) and containerd, and
// pushes the sandbox image the kubelet's pods need.
func (n *Node) startRuntime(ctx context.Context) error {
	regDir := filepath.Join(n.runtime.dir, "registry")
	conf := fmt.Sprintf("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n",
		filepath.Join(regDir, "data"), n.Registry)
	if err := os.MkdirAll(regDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(regDir, "config.yml"), []byte(conf), 0o644); err != nil {
		return err
	}
	reg, err := exec.LookPath("docker-registry")
	if err != nil {
		return fmt.Errorf("the node's registry: %w (apt-get install docker-registry)", err)
	}
	if err := n.runtime.spawn(reg, "registry", "serve", filepath.Join(regDir, "config.yml")); err != nil {
		return err
	}
	if err := n.runtime.spawn(n.bins.Containerd, "containerd", "--config", filepath.Join(n.runtime.dir, "containerd", "config.toml")); err != nil {
		return err
	}
	if err := waitFor(ctx, time.Minute, "containerd and the registry", func() error {
		if err := n.runtime.exited(); err != nil {
			return err
		}
		if out, err := n.ctr(ctx, "version"); err != nil {
			return fmt.Errorf("ctr version: %v: %s", err, out)
		}
		return registryAnswers(n.Registry)
	}); err != nil {
		return fmt.Errorf("%w\n%s", err, n.runtime.logTails())
	}
	return pushPause(ctx, n.runtime.dir, n.Registry)
}

// ctr runs Debian's ctr against the node's containerd, in the kubelet's
// namespace.
func (n *Node) ctr(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	argv := append([]string{"--address", n.sock, "--namespace", "k8s.io", "--connect-timeout", "2s"}, args...)
	return exec.CommandContext(ctx, n.bins.Ctr, argv...).CombinedOutput()
}

// startControllers starts kube-controller-manager (StatefulSets, PV binding,
// EndpointSlices, service accounts) and kube-scheduler.
func (n *Node) startControllers() error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	kc := n.Kubeconfig
	if err := n.spawn(n.bins.ControllerManager, "kube-controller-manager",
		"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--service-account-private-key-file", filepath.Join(n.Dir, "sa.key"),
		// Makes the kube-root-ca.crt ConfigMap every pod's token volume reads.
		"--root-ca-file", filepath.Join(n.Dir, "certs", "apiserver.crt"),
		"--leader-elect=false", "--use-service-account-credentials=false",
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(ports[0]),
		"--cert-dir", filepath.Join(n.Dir, "kcm-certs")); err != nil {
		return err
	}
	return n.spawn(n.bins.Scheduler, "kube-scheduler",
		"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--leader-elect=false",
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(ports[1]),
		"--cert-dir", filepath.Join(n.Dir, "scheduler-certs"))
}

// StartKubelet starts the kubelet (again, after StopKubelet) and waits until
// the Node is Ready.
func (n *Node) StartKubelet(ctx context.Context) error {
	if n.kubelet == nil {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		cfg := filepath.Join(n.Dir, "kubelet-config.yaml")
		if err := writeKubeletConfig(cfg, n.Dir, n.sock, ports[0], ports[1]); err != nil {
			return err
		}
		n.kubelet = []string{"--config", cfg, "--kubeconfig", n.Kubeconfig,
			"--root-dir", filepath.Join(n.Dir, "kubelet"), "--cert-dir", filepath.Join(n.Dir, "kubelet", "pki"),
			"--hostname-override", NodeName, "--node-ip", BridgeIP, "--v", "2"}
	}
	if err := n.spawn(n.bins.Kubelet, "kubelet", n.kubelet...); err != nil {
		return err
	}
	return waitFor(ctx, nodeReadyTimeout, "node "+NodeName+" Ready", func() error {
		if p := n.find("kubelet"); p != nil {
			select {
			case <-p.done:
				return permanent(fmt.Errorf("the kubelet exited: %v\n%s", p.err, n.logTail("kubelet")))
			default:
			}
		}
		node, err := n.clientse.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("Ready=%s: %s", c.Status, c.Message)
			}
		}
		return fmt.Errorf("no Ready condition yet")
	})
}

// StopKubelet stops the kubelet as a node restart does; the pods' containers
// keep running under containerd until the kubelet is back.
func (n *Node) StopKubelet() {
	if p := n.find("kubelet"); p != nil {
		n.stopProc(p)
		n.remove(p)
	}
}

// KillContainer kills a container's processes as a crash would (SIGKILL to
// its task), so the kubelet restarts it. id is the pod status's
// containerID, "containerd://ID".
func (n *Node) KillContainer(ctx context.Context, id string) error {
	id = strings.TrimPrefix(id, "containerd://")
	if out, err := n.ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id); err != nil {
		return fmt.Errorf("ctr tasks kill %s: %v: %s", id, err, out)
	}
	return nil
}

// Client is a clientset for the node's API server.
func (n *Node) Client() *kubernetes.Clientset { return n.clientse }

func (n *Node) client() (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", n.Kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// Logs is the end of the named component's log (kubelet, containerd, …).
func (n *Node) Logs(name string) string {
	if name == "registry" || name == "containerd" {
		return n.runtime.logTail(name)
	}
	return n.logTail(name)
}

// Stop deletes every pod (so the kubelet stops their sandboxes and networks
// cleanly), stops every component, removes what containerd left, undoes
// the host changes recorded at start, and lets the next node start. It is
// safe on a partly started node.
func (n *Node) Stop() {
	n.teardown()
	n.unlock()
}

// teardown is Stop but for the machine lock.
func (n *Node) teardown() {
	ctx := context.Background()
	if n.Server != nil && n.clientse != nil && n.find("kubelet") != nil {
		n.drainPods(ctx)
	}
	if n.Server != nil {
		n.Server.Stop()
	}
	if n.bins.Ctr != "" && n.runtime.find("containerd") != nil {
		n.removeContainers(ctx)
	}
	n.runtime.stop()
	killShims(n.sock)
	if n.runtime.dir != "" {
		unmountUnder(n.runtime.dir)
	}
	if n.host != nil {
		n.host.undo()
	}
}

// unlock releases the machine lock.
func (n *Node) unlock() {
	if n.lock != nil {
		n.lock.Close()
		n.lock = nil
	}
}

// drainPods stops the controllers that would recreate pods, deletes every
// pod at once and waits (up to a minute) for containerd to run no task.
func (n *Node) drainPods(ctx context.Context) {
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		if p := n.find(name); p != nil {
			n.stopProc(p)
			n.remove(p)
		}
	}
	pods, err := n.clientse.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	zero := int64(0)
	for _, p := range pods.Items {
		_ = n.clientse.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}
	_ = waitFor(ctx, time.Minute, "no pod sandbox left", func() error {
		out, err := n.ctr(ctx, "tasks", "ls", "-q")
		if err != nil {
			return permanent(err)
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			return fmt.Errorf("tasks left: %s", strings.ReplaceAll(s, "\n", " "))
		}
		return nil
	})
}

// removeContainers kills and removes what the kubelet did not stop.
func (n *Node) removeContainers(ctx context.Context) {
	if out, err := n.ctr(ctx, "tasks", "ls", "-q"); err == nil {
		for _, id := range strings.Fields(string(out)) {
			_, _ = n.ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
			_, _ = n.ctr(ctx, "tasks", "delete", "--force", id)
		}
	}
	if out, err := n.ctr(ctx, "containers", "ls", "-q"); err == nil {
		for _, id := range strings.Fields(string(out)) {
			_, _ = n.ctr(ctx, "containers", "delete", id)
		}
	}
}

// errPermanent marks a waitFor check's error that no retry will change.
type errPermanent struct{ error }

func permanent(err error) error { return errPermanent{err} }

// waitFor polls check every 250 ms until it returns nil, returns a
// permanent error, or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check()
		if err == nil {
			return nil
		}
		if p, ok := err.(errPermanent); ok {
			return fmt.Errorf("waiting for %s: %w", what, p.error)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not after %s: %w", what, timeout, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
