package kube

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	corev1 "k8s.io/api/core/v1"

	"github.com/ttmodel/tt-model/internal/engine"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
	"github.com/ttmodel/tt-model/runner"
	"github.com/ttmodel/tt-model/runner/runnertest"
)

// TestPodEnvironment renders every profile of models/pi05, packaged by the
// real `tt-model package` around the stand-in server (which answers GET
// /env with its environment), and runs each rendered server container as a
// kubelet would, on the Docker engine (no kubelet runs here): the package's
// image with the container's command, args, env and user, a folder per
// volume mount. The server must see the rendered profile's variables and
// none that only another profile sets: a pod can override a variable of
// the image but not unset it, so the image may carry only what every
// profile shares. Beyond the pod's env, only the image's PATH and HOME and
// the engine's HOSTNAME may appear.
func TestPodEnvironment(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "packages models/pi05 and runs its pods' containers: skipped with -short")
	}
	testenv.Require(t, "docker")
	ctx := context.Background()
	dc, err := engine.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	built := runnertest.PackagePI05(t, root, runnertest.StandInTools(t, root), fmt.Sprintf("k8s-env-%d", os.Getpid()))
	tag := built.Wire.Container.Image.Tag
	t.Cleanup(func() { dc.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true}) }) //nolint:errcheck // best effort
	pkg, err := runner.LoadPackage(built.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, profile := range built.Profiles {
		t.Run(profile, func(t *testing.T) {
			m, err := Render(pkg, Options{Registry: testRegistry, Profile: profile})
			if err != nil {
				t.Fatal(err)
			}
			c := m.StatefulSet.Spec.Template.Spec.Containers[0]
			podName := m.Name + "-0"
			got := runPodContainer(t, dc, tag, c, podName, built.HFHome)

			_, foreign := runnertest.ProfileEnv(t, built.Wire, profile)
			for _, k := range foreign {
				if v, ok := got[k]; ok {
					t.Errorf("%s=%s reached the %s pod's server: only other profiles set it", k, v, profile)
				}
			}
			want := map[string]string{}
			for _, e := range c.Env {
				want[e.Name] = e.Value
			}
			want["POD_NAME"] = podName
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s=%q, want the pod's %q", k, got[k], v)
				}
			}
			image := map[string]bool{"PATH": true, "HOME": true, "HOSTNAME": true} // the image's and the engine's
			for _, k := range foreign {
				image[k] = true // reported above
			}
			for k, v := range got {
				if _, ok := want[k]; !ok && !image[k] {
					t.Errorf("%s=%s reached the %s pod's server from outside its env", k, v, profile)
				}
			}
		})
	}
}

// runPodContainer runs the rendered container c on the engine as the
// kubelet would run it in pod podName (the image by its local tag: the
// rendered reference names it by digest, which a loaded image does not
// answer to), with HF_HOME's volume at hfHome and a fresh folder for every
// other mount, and returns the environment its server answers on GET /env.
// The container is removed when the test ends.
func runPodContainer(t *testing.T, dc *client.Client, image string, c corev1.Container, podName, hfHome string) map[string]string {
	t.Helper()
	var env []string
	for _, e := range c.Env {
		v := e.Value
		if f := e.ValueFrom; f != nil && f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.name" {
			v = podName
		}
		env = append(env, e.Name+"="+v)
	}
	var binds []string
	for _, vm := range c.VolumeMounts {
		src := hfHome
		if vm.MountPath != "/hf" {
			src = t.TempDir()
			if err := os.Chmod(src, 0o777); err != nil { // the pod runs as the image's tt user
				t.Fatal(err)
			}
		}
		binds = append(binds, src+":"+vm.MountPath)
	}
	id, ip := runnertest.RunContainer(t, dc, client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, Entrypoint: c.Command, Cmd: c.Args, Env: env, User: "1000:1000"},
		HostConfig: &container.HostConfig{Binds: binds},
	})
	return runnertest.ServerEnv(t, fmt.Sprintf("http://%s:%d", ip, c.Ports[0].ContainerPort), func() string {
		var logs strings.Builder
		if rc, err := dc.ContainerLogs(context.Background(), id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true}); err == nil {
			io.Copy(&logs, io.LimitReader(rc, 8192)) //nolint:errcheck // for the message only
			rc.Close()
		}
		return logs.String()
	})
}
