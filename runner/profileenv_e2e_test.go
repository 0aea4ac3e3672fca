package runner

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/runner/runnertest"
)

// TestProfileEnvironment packages models/pi05, whose three profiles set
// different variables (PI05_SLO_* only in multi-robot, the default;
// PI05_MAX_BATCH only in disaggregated), with the real `tt-model package`
// around the stand-in server, which answers GET /env with its environment,
// and checks what the server of each profile gets:
//   - `tt-model serve --profile P`, on the Docker engine and on the bare
//     host: P's whole launch environment, and no variable that only other
//     profiles set. A container's env can override an image's variable but
//     not unset it, so a variable the image carried for its default profile
//     would reach every other profile's server;
//   - a plain `docker run` of the image: the default profile's environment,
//     with `docker run -e` still winning over it, as over an image ENV.
func TestProfileEnvironment(t *testing.T) {
	d := e2eDocker(t)
	e := packagePI05(t, d, "pi05-env", runnertest.StandInTools(t, ".."))
	someForeign := false
	for _, p := range e.Profiles {
		_, foreign := runnertest.ProfileEnv(t, e.Wire, p)
		someForeign = someForeign || len(foreign) > 0
	}
	if !someForeign {
		t.Fatalf("every profile of %s sets the same variables: this test would check nothing", e.Name)
	}
	for _, kind := range []string{"docker", "host"} {
		for _, profile := range e.Profiles {
			t.Run(kind+"/"+profile, func(t *testing.T) {
				url := e.serve(t, profile, kind == "host")
				got := runnertest.ServerEnv(t, url, func() string { return "" })
				checkServedEnv(t, e, profile, kind == "host", got)
				e.stop(t, profile)
			})
		}
	}
	t.Run("docker run", func(t *testing.T) {
		def, _ := runnertest.ProfileEnv(t, e.Wire, e.Profiles[0])
		overridden := maps.Clone(def)
		overridden["PI05_LAYOUT"] = "sp"
		for _, tc := range []struct {
			name string
			env  []string
			want map[string]string
		}{
			{"the default profile", nil, def},
			{"-e wins", []string{"PI05_LAYOUT=sp"}, overridden},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got := plainDockerRun(t, d, e.Wire.Container.Image.Tag, tc.env)
				for k, v := range tc.want {
					if got[k] != v {
						t.Errorf("%s=%q, want %q", k, got[k], v)
					}
				}
			})
		}
	})
}

// checkServedEnv checks the environment a server of profile got from
// `tt-model serve`: the profile's launch environment (HF_MODEL pointed at
// the pinned snapshot; on the host, container mount points mapped to host
// folders), nothing another profile sets alone, and nothing beyond what the
// runner adds: the image's own variables and the runner's cache settings in
// a container, the caller's environment on the host.
func checkServedEnv(t *testing.T, e *pi05E2E, profile string, host bool, got map[string]string) {
	t.Helper()
	own, foreign := runnertest.ProfileEnv(t, e.Wire, profile)
	for _, k := range foreign {
		if v, ok := got[k]; ok {
			t.Errorf("%s=%s reached the %s server: only other profiles set it", k, v, profile)
		}
	}
	for k, v := range own {
		switch {
		case k == "HF_MODEL":
			if !strings.HasSuffix(got[k], "/snapshots/"+runnertest.PI05Pin) {
				t.Errorf("HF_MODEL=%q, want the pinned snapshot's folder", got[k])
			}
		case host && strings.HasPrefix(v, "/cache/"):
			if got[k] == "" || strings.HasPrefix(got[k], "/cache/") {
				t.Errorf("%s=%q, want %s mapped to the host's cache folder", k, got[k], v)
			}
		case got[k] != v:
			t.Errorf("%s=%q, want the profile's %q", k, got[k], v)
		}
	}
	allowed := map[string]bool{"HF_HOME": true, "TT_METAL_CACHE": true, "TT_WEIGHT_CACHE": true, "HF_TOKEN": true}
	if host {
		for _, kv := range e.Env {
			k, _, _ := strings.Cut(kv, "=")
			allowed[k] = true
		}
	} else {
		for _, k := range []string{"PATH", "HOME", "HOSTNAME"} { // the image's and the engine's
			allowed[k] = true
		}
	}
	for _, k := range foreign {
		allowed[k] = true // reported above
	}
	for k, v := range got {
		if _, ok := own[k]; !ok && !allowed[k] {
			t.Errorf("%s=%s reached the %s server from neither the profile nor the runner", k, v, profile)
		}
	}
}

// plainDockerRun runs the image as `docker run IMAGE` with env (-e) would,
// on the engine's bridge network, and returns the environment its server
// answers on GET /env. The container is removed when the test ends.
func plainDockerRun(t *testing.T, d *Docker, image string, env []string) map[string]string {
	t.Helper()
	id, ip := runnertest.RunContainer(t, d.c, client.ContainerCreateOptions{Config: &container.Config{Image: image, Env: env}})
	return runnertest.ServerEnv(t, fmt.Sprintf("http://%s:8000", ip), func() string {
		var logs strings.Builder
		d.Logs(context.Background(), &Instance{ID: id}, false, &logs) //nolint:errcheck // for the message only
		return logs.String()
	})
}
