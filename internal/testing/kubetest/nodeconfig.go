package kubetest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/ttmodel/tt-model/internal/testing/imagetest"
	"github.com/ttmodel/tt-model/internal/testing/kubebin"
)

// pauseRef is the sandbox image's path in the node's registry.
const pauseRef = "kubetest/pause:1"

// writeNodeConfig writes containerd's configuration and the CNI network
// under dir: the sandbox image comes from registry, which a hosts.toml
// entry makes containerd reach over plain HTTP. containerd keeps its root, state, runc state and sockets
// under dir/containerd; restrict_oom_score_adj is required where the
// process may not lower an oom_score_adj (no CAP_SYS_RESOURCE, as in the
// VMs these tests run in), which the kubelet asks for its sandboxes.
func writeNodeConfig(dir, sock, registry string) error {
	c := filepath.Join(dir, "containerd")
	for _, d := range []string{c, filepath.Join(dir, "cni", "net.d"), filepath.Join(c, "certs.d")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	config := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_unprivileged_ports = true
  enable_unprivileged_icmp = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[7]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[8]q
    conf_dir = %[9]q
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[10]q
`, filepath.Join(c, "root"), filepath.Join(c, "state"), sock, sock+".ttrpc", filepath.Join(c, "opt"),
		registry+"/"+pauseRef, filepath.Join(c, "runc"), kubebin.CNIDir, filepath.Join(dir, "cni", "net.d"), filepath.Join(c, "certs.d"))
	if err := os.WriteFile(filepath.Join(c, "config.toml"), []byte(config), 0o644); err != nil {
		return err
	}
	hosts := filepath.Join(c, "certs.d", registry)
	if err := os.MkdirAll(hosts, 0o755); err != nil {
		return err
	}
	toml := fmt.Sprintf("server = \"http://%[1]s\"\n\n[host.\"http://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", registry)
	if err := os.WriteFile(filepath.Join(hosts, "hosts.toml"), []byte(toml), 0o644); err != nil {
		return err
	}
	cni := fmt.Sprintf(`{"cniVersion": "0.4.0", "name": %q, "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "loopback"}]}
`, cniNetwork, bridgeName, filepath.Join(dir, "cni", "ipam"), podSubnet, BridgeIP)
	return os.WriteFile(filepath.Join(dir, "cni", "net.d", "10-"+cniNetwork+".conflist"), []byte(cni), 0o644)
}

// writeKubeletConfig writes the kubelet's configuration: cgroupfs (as the
// containerd above), cgroup v1 allowed (these VMs run a hybrid hierarchy),
// its API on BridgeIP:port (the API server reaches it there for logs, exec
// and port-forward), pod logs under dir, and eviction thresholds a busy
// test machine does not trip.
func writeKubeletConfig(path, dir, sock string, port, healthzPort int) error {
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
serializeImagePulls: false
resolvConf: /etc/resolv.conf
syncFrequency: 5s
fileCheckFrequency: 5s
`, sock, filepath.Join(dir, "kubelet", "pod-logs"), BridgeIP, port, healthzPort)
	return os.WriteFile(path, []byte(cfg), 0o644)
}

// registryAnswers is nil once the registry's /v2/ answers 200.
func registryAnswers(addr string) error {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/v2/")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("registry /v2/: HTTP %d", resp.StatusCode)
	}
	return nil
}

// pushPause builds the pause command statically and pushes it to the
// registry as a one-layer image.
func pushPause(ctx context.Context, dir, registry string) error {
	bin := filepath.Join(dir, "pause")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin,
		"github.com/ttmodel/tt-model/internal/testing/kubetest/pause")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build the pause command: %v\n%s", err, out)
	}
	img, err := nodeImage(bin, "pause")
	if err != nil {
		return fmt.Errorf("the pause image: %w", err)
	}
	if err := pushImage(ctx, img, registry+"/"+pauseRef); err != nil {
		return fmt.Errorf("push the pause image: %w", err)
	}
	return nil
}

// nodeImage is a linux/amd64 image of one static binary at /NAME, its
// entrypoint.
func nodeImage(bin, entry string) (v1.Image, error) {
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return fileTar(bin, entry) })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	return imagetest.Linux(img, func(cf *v1.ConfigFile) { cf.Config.Entrypoint = []string{"/" + entry} })
}

// fileTar is a tar stream holding the file bin as /entry (mode 0755) and an
// empty /tmp.
func fileTar(bin, entry string) (io.ReadCloser, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777},
		{Name: entry, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data))},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return io.NopCloser(&buf), nil
}

// pushImage writes img to ref in a plain-HTTP registry.
func pushImage(ctx context.Context, img v1.Image, ref string) error {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return err
	}
	return remote.Write(r, img, remote.WithContext(ctx))
}
