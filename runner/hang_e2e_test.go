package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/ttmodel/tt-model/internal/readiness"
	"github.com/ttmodel/tt-model/runner/runnertest"
)

// The hang chain's paths inside the container: /cache is a host mount
// (<cache root>/<package>/cache), so the test reads both from the host.
const (
	testResetBin    = "/usr/local/bin/test-reset"
	testResetRecord = "/cache/test-reset.jsonl"
	testHangMarker  = "/cache/hang_marker"
)

// TestRFDETRHangChain is the hang chain on the Docker engine: the
// package's base image (a docker-archive written here) holds a test reset
// command, the server is served with `--reset-cmd` naming it, and each
// prediction makes the server exit 75. Twice, the supervisor inside the
// container writes the hang marker, runs the reset command exactly once
// (with the marker still there and no {chips} argument: the container has no
// chips, so the chip check is skipped), removes the marker, and starts the
// server again, ready and answering; the engine never restarts the
// container.
func TestRFDETRHangChain(t *testing.T) {
	d := e2eDocker(t)
	ctx := context.Background()
	base := filepath.Join(t.TempDir(), "test-reset-base.tar")
	writeResetBase(t, base)
	// The hang marker lives on the /cache mount, as pi05's does.
	e := packageRFDETR(t, d, "hang", base, runnertest.RFDETRHangProfile("PI05_HANG_MARKER: "+testHangMarker))
	inst := e.serve(t, "hang", []string{"--reset-cmd", testResetBin + " " + testResetRecord + " " + testHangMarker + " {chips}"})

	hostCache := filepath.Join(e.cacheRoot, e.pkg.Wire.Name, "cache")
	record := filepath.Join(hostCache, filepath.Base(testResetRecord))
	marker := filepath.Join(hostCache, filepath.Base(testHangMarker))
	if _, err := os.Stat(record); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the reset command ran before any hang (stat %s: %v)", record, err)
	}
	wantArgv := []string{testResetBin, testResetRecord, testHangMarker} // no chips: {chips} is left out
	for hang := 1; hang <= 2; hang++ {
		// Answered, then the server exits 75.
		if n, err := predict(inst.Port); err != nil || n < 1 {
			t.Fatalf("/predict %d: %d detections, %v", hang, n, err)
		}
		logs := waitServerBack(t, d, inst, hang)
		resets := runnertest.ReadResets(t, record)
		if len(resets) != hang {
			t.Fatalf("after hang %d the reset command ran %d times, want %d: %+v\n%s", hang, len(resets), hang, resets, logs)
		}
		if r := resets[hang-1]; !slices.Equal(r.Argv, wantArgv) || !r.Marker {
			t.Errorf("reset %d: argv %q, marker present %v; want argv %q with the marker present", hang, r.Argv, r.Marker, wantArgv)
		}
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after hang %d the hang marker %s is still there (stat: %v)", hang, marker, err)
		}
		if got := strings.Count(logs, "exit 75"); got < hang {
			t.Errorf("after hang %d the container output shows %d exits 75:\n%s", hang, got, logs)
		}
		if got := strings.Count(logs, "reset command done; no chips on this host, so the chip check is skipped"); got != hang {
			t.Errorf("after hang %d the supervisor reported %d good resets, want %d:\n%s", hang, got, hang, logs)
		}
	}

	cur, err := d.Find(ctx, inst.Name)
	if err != nil || cur == nil {
		t.Fatalf("find %s: %+v, %v", inst.Name, cur, err)
	}
	if cur.ID != inst.ID || !cur.Running || cur.Restarts != 0 || !cur.Started.Equal(inst.Started) {
		t.Errorf("container after two hangs: id %s, running %v, restarts %d, started %s; want id %s running, 0 restarts, started %s",
			shortID(cur.ID), cur.Running, cur.Restarts, cur.Started, shortID(inst.ID), inst.Started)
	}
	if res, err := d.Stop(ctx, inst, 2*time.Minute, io.Discard); err != nil || res.ExitCode != 0 || res.Killed {
		t.Errorf("stop: %+v, %v; want exit 0, not killed", res, err)
	}
}

// waitServerBack waits (bounded: CI machines are slow, this is no timing
// assertion) until the supervisor has spawned the server hang+1 times and
// /health says ok, and returns the container's output. Counting spawns
// keeps the old server, which may still answer /health for a moment, from
// counting as the new one; the supervisor runs the reset before it spawns
// the next server, so its record is complete by then.
func waitServerBack(t *testing.T, d *Docker, inst *Instance, hang int) string {
	t.Helper()
	ctx := context.Background()
	health := &http.Client{Timeout: 2 * time.Second}
	url := fmt.Sprintf("http://127.0.0.1:%d/health", inst.Port)
	var out bytes.Buffer
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		out.Reset()
		if err := d.Logs(ctx, inst, false, &out); err != nil {
			t.Fatal(err)
		}
		if strings.Count(out.String(), "server spawned") >= hang+1 && readiness.Probe(ctx, health, url) == nil {
			return out.String()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not come back after hang %d:\n%s", hang, out.String())
		}
	}
}

// writeResetBase writes a docker-archive tarball (what `docker save`
// makes) of a linux/amd64 image holding only test-reset at testResetBin,
// for runtime.base.
func writeResetBase(t *testing.T, path string) {
	t.Helper()
	bin := runnertest.BuildStatic(t, filepath.Join("hang", "testreset"), "test-reset")
	img := runnertest.BinImage(t, bin, filepath.Base(testResetBin), nil)
	ref, err := name.NewTag("tt-model-test/reset-base:latest")
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(path, ref, img); err != nil {
		t.Fatal(err)
	}
}
