package kube

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ttmodel/tt-model/internal/engine"
	"github.com/ttmodel/tt-model/internal/testing/kubetest"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
	"github.com/ttmodel/tt-model/runner/runnertest"
)

// testStatusReadsSupervisor reads a real supervisor's status through the
// API server's pod proxy. No kubelet runs, so the "pod" is a container on
// the Docker engine running `tt-model supervise` (a static build of this
// tree) over a stand-in server, and the pod object is given its IP, as a
// kubelet would report it.
func testStatusReadsSupervisor(t *testing.T, srv *kubetest.Server) {
	testenv.Require(t, "docker")
	ctx := context.Background()
	const ns = "supervisor"
	dc, err := engine.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	ip := runSupervisorContainer(t, dc)

	cl := connect(t, srv, ns)
	m, err := Render(stagedPackage(t, "rf-detr", nil), Options{Registry: testRegistry, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Apply(ctx, m, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	started := true
	createPod(t, cl, m, 0, corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "server", Image: m.Image, ImageID: m.Image, Started: &started, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}},
	})

	var r ReplicaStatus
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		st, err := cl.Status(ctx, ns, m.Name)
		if err != nil {
			t.Fatal(err)
		}
		if r = st.Pods[0]; r.Supervisor != nil && r.State == "ready" {
			break
		}
	}
	if r.Supervisor == nil || r.State != "ready" || r.Supervisor.ServerPID <= 0 || r.Supervisor.Starts != 1 {
		t.Fatalf("replica 0: %+v (supervisor %+v)", r, r.Supervisor)
	}
}

// runSupervisorContainer starts `tt-model supervise --status-addr :9100 --
// sleeper` in a container of an image made here (the two static binaries
// and /tmp) and returns the container's IP; both go when t ends.
func runSupervisorContainer(t *testing.T, dc *client.Client) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	for out, pkg := range map[string]string{"tt-model": "../cmd/tt-model", "sleeper": "./testdata/sleeper"} {
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, out), pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		b, err := rootfs(dir, "tt-model", "sleeper")
		return io.NopCloser(bytes.NewReader(b)), err
	})
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.Config(img, v1.Config{User: "1000:1000"})
	if err != nil {
		t.Fatal(err)
	}
	suffix := make([]byte, 4)
	rand.Read(suffix) //nolint:errcheck // never fails
	name := "k8s-status-test-" + hex.EncodeToString(suffix)
	tag := "k8s-status-test:" + hex.EncodeToString(suffix)
	if err := engine.Load(ctx, dc, tag, img); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true}) }) //nolint:errcheck // best effort
	_, ip := runnertest.RunContainer(t, dc, client.ContainerCreateOptions{Name: name, Config: &container.Config{
		Image: tag,
		Cmd:   []string{"/tt-model", "supervise", "--ready-line", "sleeper ready", "--status-addr", ":9100", "--", "/sleeper"},
	}})
	return ip
}

// rootfs is a tar of the named files of dir at / (mode 0755) and /tmp.
func rootfs(dir string, files ...string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777}); err != nil {
		return nil, err
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f, Mode: 0o755, Size: int64(len(data))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), tw.Close()
}
