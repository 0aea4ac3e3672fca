// Package kubebin finds the Kubernetes and etcd binaries that
// scripts/kube-apiserver.sh builds once per machine from their Go modules,
// and the Debian programs a test node runs beside them (containerd, runc,
// the CNI plugins).
// It is the one place that knows their versions and cache folder, for the
// test control plane (internal/testing/kubetest) and the "kube-apiserver" test
// requirement (internal/testing/testenv).
package kubebin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// The versions scripts/kube-apiserver.sh builds (keep the two in step); the
// binaries' folder is named after them.
const (
	KubeVersion = "v1.37.2"
	EtcdVersion = "v3.6.16"
)

// Requirement is the internal/testing/testenv name of "both binaries are built".
const Requirement = "kube-apiserver"

// DirEnv names a folder holding kube-apiserver and etcd, instead of the cache.
const DirEnv = "TT_KUBE_BIN"

// CacheEnv overrides the cache root (default ~/.cache/tt-model/k8s,
// XDG_CACHE_HOME honoured), as the script does.
const CacheEnv = "TT_KUBE_CACHE"

// Dir is the folder with both binaries, or an error saying how to build them.
func Dir() (string, error) {
	dir := os.Getenv(DirEnv)
	if dir == "" {
		root := os.Getenv(CacheEnv)
		if root == "" {
			cache, err := os.UserCacheDir()
			if err != nil {
				return "", fmt.Errorf("cache folder: %w", err)
			}
			root = filepath.Join(cache, "tt-model", "k8s")
		}
		dir = filepath.Join(root, "kube-"+KubeVersion+"-etcd-"+EtcdVersion)
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("no %s in %s: build both once with scripts/kube-apiserver.sh build (about 7 min on 2 cores)", name, dir)
		}
	}
	return dir, nil
}

// NodeRequirement is the internal/testing/testenv name of "a single-node
// cluster can run here": the node binaries built, containerd, runc and the
// CNI plugins installed, and root (the kubelet and containerd need it).
const NodeRequirement = "kube-node"

// CNIDir is where Debian's containernetworking-plugins installs the plugins.
const CNIDir = "/usr/lib/cni"

// NodeBinaries are the paths of what a node runs beyond the API server and
// etcd (Dir's folder holds the Kubernetes ones), or an error naming the
// first that is missing and how to get it.
type NodeBinaries struct {
	Scheduler, ControllerManager, Kubelet string
	Containerd, Ctr                       string
}

// Node finds the node's binaries: the Kubernetes ones in dir, containerd
// and ctr on PATH (Debian's containerd), runc and the CNI plugins.
func Node(dir string) (NodeBinaries, error) {
	var b NodeBinaries
	for _, k := range []struct {
		dst  *string
		name string
	}{{&b.Scheduler, "kube-scheduler"}, {&b.ControllerManager, "kube-controller-manager"}, {&b.Kubelet, "kubelet"}} {
		p := filepath.Join(dir, k.name)
		if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
			return b, fmt.Errorf("no %s in %s: build it with scripts/kube-apiserver.sh build (a few minutes more once the API server is built)", k.name, dir)
		}
		*k.dst = p
	}
	for _, k := range []struct {
		dst  *string
		name string
	}{{&b.Containerd, "containerd"}, {&b.Ctr, "ctr"}, {new(string), "runc"}} {
		p, err := exec.LookPath(k.name)
		if err != nil {
			return b, fmt.Errorf("no %s on PATH: apt-get install containerd", k.name)
		}
		*k.dst = p
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(CNIDir, plugin)); err != nil {
			return b, fmt.Errorf("no CNI plugin %s in %s: apt-get install containernetworking-plugins", plugin, CNIDir)
		}
	}
	if os.Geteuid() != 0 {
		return b, fmt.Errorf("the kubelet and containerd run as root: this process is uid %d", os.Geteuid())
	}
	return b, nil
}

// Scheduler is kube-scheduler in dir (Dir's folder), built beside the API
// server by the same script, or an error saying how to build it.
func Scheduler(dir string) (string, error) {
	p := filepath.Join(dir, "kube-scheduler")
	if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("no kube-scheduler in %s: build it with scripts/kube-apiserver.sh build (a few minutes more once the API server is built)", dir)
	}
	return p, nil
}
