package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/internal/engine"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
	"github.com/ttmodel/tt-model/models/rfdetr"
	"github.com/ttmodel/tt-model/runner/runnertest"
)

// The Go memory limit in a real container with a memory limit (docker run --memory 1g): the server
// reads its cgroup (v1 or v2, whichever the engine's host has), sets the runtime's limit to it less
// the packed weights and scratch of the RF-DETR program once loaded, and says so in its log; the
// runtime's own gauge (go_gc_gomemlimit_bytes) shows the value in effect. With GOMEMLIMIT set the
// user's value stays.
func TestGoMemoryLimitFromContainerCgroup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a static server and runs it in containers: skipped with -short")
	}
	testenv.Require(t, "docker")
	ctx := context.Background()
	dc, err := engine.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()

	// A static binary: the image holds nothing else.
	bin := filepath.Join(t.TempDir(), "tt-model-server")
	build := exec.Command("go", "build", "-trimpath", "-tags", "netgo,osusergo",
		"-ldflags", `-linkmode external -extldflags "-static"`, "-o", bin, "./cmd/tt-model-server")
	build.Dir = filepath.Join("..", "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, b)
	}
	weights := t.TempDir()
	if err := (rfdetr.RandomCheckpoint{Seed: 3}).Write(weights); err != nil {
		t.Fatal(err)
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	tag := "tt-model-memlimit-test:" + hex.EncodeToString(suffix)
	if err := engine.Load(ctx, dc, tag, runnertest.BinImage(t, bin, "tt-model-server", nil)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = dc.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true})
	})

	const memory = 1 << 30
	set := regexp.MustCompile(`msg="Go memory limit set: the cgroup limit less the model's native memory" limit_bytes=(\d+) cgroup_limit_bytes=(\d+) native_bytes=(\d+) cgroup_file=(\S+)`)
	for _, c := range []struct {
		name string
		env  []string
		// check reads the log and returns the limit the runtime must report.
		check func(t *testing.T, log string) int64
	}{
		{"from the cgroup", nil, func(t *testing.T, log string) int64 {
			m := set.FindStringSubmatch(log)
			if m == nil {
				t.Fatalf("no memory limit line in the log:\n%s", log)
			}
			limit, _ := strconv.ParseInt(m[1], 10, 64)
			cgroup, _ := strconv.ParseInt(m[2], 10, 64)
			native, _ := strconv.ParseInt(m[3], 10, 64)
			t.Logf("cgroup %d (%s), native %d, Go limit %d", cgroup, m[4], native, limit)
			// The RF-DETR program at fp32: about 110 MB of packed weights and 70 MB of scratch.
			if cgroup != memory || native < 150<<20 || native > 250<<20 || limit != cgroup-native {
				t.Errorf("cgroup %d, native %d, limit %d: want %d, the program's bytes, and their difference", cgroup, native, limit, memory)
			}
			return limit
		}},
		{"GOMEMLIMIT wins", []string{"GOMEMLIMIT=300MiB"}, func(t *testing.T, log string) int64 {
			if !strings.Contains(log, `msg="Go memory limit left to GOMEMLIMIT" GOMEMLIMIT=300MiB limit_bytes=314572800`) || set.MatchString(log) {
				t.Errorf("the log does not leave the limit to GOMEMLIMIT:\n%s", log)
			}
			return 300 << 20
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			created, err := dc.ContainerCreate(ctx, client.ContainerCreateOptions{
				Name: strings.ReplaceAll(tag, ":", "-") + "-" + strconv.Itoa(len(c.env)),
				Config: &container.Config{
					Image: tag,
					Cmd:   []string{"/usr/local/bin/tt-model-server", "--host", "0.0.0.0", "--port", "8000"},
					Env:   append([]string{"TT_RF_DETR_WEIGHTS=/weights", "TT_WEIGHT_CACHE=off"}, c.env...),
				},
				HostConfig: &container.HostConfig{
					Binds:     []string{weights + ":/weights:ro"},
					Resources: container.Resources{Memory: memory},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_, _ = dc.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true})
			})
			if _, err := dc.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
				t.Fatal(err)
			}
			logs := func() string {
				rc, err := dc.ContainerLogs(ctx, created.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
				if err != nil {
					t.Fatal(err)
				}
				defer rc.Close()
				var out bytes.Buffer
				_, _ = stdcopy.StdCopy(&out, &out, rc)
				return out.String()
			}
			var log string
			for deadline := time.Now().Add(3 * time.Minute); !strings.Contains(log, `msg=ready`); time.Sleep(200 * time.Millisecond) {
				log = logs()
				res, err := dc.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !res.Container.State.Running {
					t.Fatalf("the server stopped (exit %d, OOM killed %v):\n%s", res.Container.State.ExitCode, res.Container.State.OOMKilled, logs())
				}
				if time.Now().After(deadline) {
					t.Fatalf("not ready:\n%s", log)
				}
			}
			want := c.check(t, log)

			res, err := dc.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ip := ""
			for _, n := range res.Container.NetworkSettings.Networks {
				if n.IPAddress.IsValid() {
					ip = n.IPAddress.String()
				}
			}
			resp, err := http.Get(fmt.Sprintf("http://%s:8000/metrics", ip))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			line := grepLine(string(b), "go_gc_gomemlimit_bytes ")
			if v, err := strconv.ParseFloat(strings.TrimPrefix(line, "go_gc_gomemlimit_bytes "), 64); err != nil || int64(v) != want {
				t.Errorf("the runtime reports %q, want the limit %d", line, want)
			}
		})
	}
}

// grepLine is the first line of s that starts with prefix.
func grepLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
