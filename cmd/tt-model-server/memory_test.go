package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/testing/syncbuf"
	"github.com/ttmodel/tt-model/models/imagemem"
	"github.com/ttmodel/tt-model/models/imagemem/imagememtest"
	"github.com/ttmodel/tt-model/models/rfdetr"
)

// Memory is measured on the real server binary in a process of its own, over its socket: the
// kernel's peak resident size (VmHWM) is reset before each request (clear_refs), so what a request
// makes the process grow is read after it, against the resident size just before.

// serverProcess is tt-model-server running as a child of the test.
type serverProcess struct {
	cmd    *exec.Cmd
	base   string
	log    *syncbuf.Buffer
	exited chan error
}

// startServerProcess starts the tt-model-server binary bin with exactly env (plus PATH, a HOME of
// its own and TT_WEIGHT_CACHE=off unless env says), then waits until /health says ok; it is
// stopped (SIGTERM) when the test ends.
func startServerProcess(t *testing.T, bin string, env map[string]string) *serverProcess {
	t.Helper()
	port := freePort(t)
	p := &serverProcess{base: "http://127.0.0.1:" + port, log: &syncbuf.Buffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(bin, "--host", "127.0.0.1", "--port", port)
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	if env["TT_WEIGHT_CACHE"] == "" {
		p.cmd.Env = append(p.cmd.Env, "TT_WEIGHT_CACHE=off")
	}
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-p.exited:
			t.Fatalf("the server exited while starting (%v):\n%s", err, p.log.String())
		default:
		}
		if resp, err := http.Get(p.base + "/health"); err == nil {
			var h map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if h["status"] == "ok" {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server is not ready:\n%s", p.log.String())
		}
	}
}

// status reads a size line of /proc/<pid>/status (VmRSS:, VmHWM:) in bytes.
func (p *serverProcess) status(t *testing.T, key string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == key {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", key, p.cmd.Process.Pid)
	return 0
}

// growth runs send and returns how far the server's resident size rose above what it was before:
// its peak during send (VmHWM, reset first) less its size just before.
func (p *serverProcess) growth(t *testing.T, send func()) int64 {
	t.Helper()
	// Writing 5 to clear_refs resets the peak resident size to the current one (Linux 4.0).
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.cmd.Process.Pid), []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
	before := p.status(t, "VmRSS:")
	send()
	return p.status(t, "VmHWM:") - before
}

// post sends body to path and returns the status, the Retry-After header and the body; a request
// without an answer is an error (safe to call from any goroutine).
func (p *serverProcess) post(path string, body []byte) (code int, retryAfter, answer string, err error) {
	resp, err := http.Post(p.base+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, "", "", fmt.Errorf("%s: %w\n%s", path, err, p.log.String())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b), err
}

// postGrowth posts body to path and returns the answer and how far the server grew for it.
func (p *serverProcess) postGrowth(t *testing.T, path string, body []byte) (code int, answer string, grown int64) {
	t.Helper()
	var err error
	grown = p.growth(t, func() { code, _, answer, err = p.post(path, body) })
	if err != nil {
		t.Fatal(err)
	}
	return code, answer, grown
}

// requestMemoryHeld is the server's tt_model_request_memory_bytes.
func (p *serverProcess) requestMemoryHeld(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(p.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "tt_model_request_memory_bytes{") {
			return line[strings.LastIndexByte(line, ' ')+1:]
		}
	}
	t.Fatalf("no tt_model_request_memory_bytes on /metrics")
	return ""
}

const slack = 48 << 20 // the request's body, its JSON and base64 copies, the collector's headroom

// Every way RF-DETR takes a picture, at the sizes a few hundred kilobytes can declare: a picture
// decoded whole is refused from its header when its decode would exceed imagemem.MaxDecodeBytes
// (the worst, a progressive 4:4:4 JPEG of 8192×8192, would take 960 MiB), and an accepted one
// grows the server by its decode and the resize intermediate (3×height×560 floats), no more. The
// refusals share a server; each accepted picture gets a fresh one, since the heap an earlier
// picture left behind would serve the next and hide its growth.
func TestRFDETRImageMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server and loads a full-size checkpoint: skipped with -short")
	}
	dir := t.TempDir()
	if err := (rfdetr.RandomCheckpoint{Seed: 3}).Write(dir); err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t, t.TempDir(), "./cmd/tt-model-server", "tt-model-server")
	env := map[string]string{"TT_RF_DETR_WEIGHTS": dir, "TT_WEIGHT_CACHE": t.TempDir()} // packed once, then mapped
	shared := startServerProcess(t, bin, env)
	intermediate := func(h int) int64 { return int64(3 * h * rfdetr.InputSize * 4) }
	cases := []struct {
		name  string
		data  []byte
		code  int
		want  string // in the answer
		bound int64  // the most the server may grow, besides slack
	}{
		{"progressive 4:4:4 JPEG 8192x8192", imagememtest.JPEG{Width: 8192, Height: 8192, Progressive: true}.Encode(), 400,
			"decoding it takes 960 MiB, more than the 128 MiB allowed per image (progressive 4:4:4 JPEG pictures may have at most 8.9 megapixels)", 0},
		{"progressive CMYK JPEG 8192x8192", imagememtest.JPEG{Width: 8192, Height: 8192, Progressive: true, CMYK: true}.Encode(), 400,
			"decoding it takes 1536 MiB", 0},
		{"interlaced 16-bit RGBA PNG 8192x8192", imagememtest.PNG{Width: 8192, Height: 8192, Depth: 16, ColorType: 6, Interlaced: true}.Encode(), 400,
			"a non-interlaced PNG is read row by row and may be 8192x8192", 0},
		{"progressive 4:2:0 JPEG 4032x3024", imagememtest.JPEG{Width: 4032, Height: 3024, Progressive: true, Subsample420: true}.Encode(), 200,
			`"image_size":{"width":4032,"height":3024}`, -1},
		{"interlaced 8-bit RGB PNG 4000x4000", imagememtest.PNG{Width: 4000, Height: 4000, Depth: 8, ColorType: 2, Interlaced: true}.Encode(), 200,
			`"image_size":{"width":4000,"height":4000}`, -1},
		{"16-bit RGBA PNG 8192x8192 (streamed)", imagememtest.PNG{Width: 8192, Height: 8192, Depth: 16, ColorType: 6}.Encode(), 200,
			`"image_size":{"width":8192,"height":8192}`, intermediate(8192)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := shared
			if c.code == 200 {
				p = startServerProcess(t, bin, env)
			}
			bound := c.bound
			if bound < 0 { // decoded whole: the decode and the intermediate
				hd, err := imagemem.ReadHeader(c.data)
				if err != nil {
					t.Fatal(err)
				}
				bound = hd.DecodeBytes + intermediate(hd.Height)
			}
			body, _ := json.Marshal(map[string]string{"image": base64.StdEncoding.EncodeToString(c.data)})
			code, answer, grown := p.postGrowth(t, "/predict", body)
			t.Logf("%d-byte body: %d, the server grew by %.1f MiB (allowed %.1f + %.0f MiB)", len(body), code, float64(grown)/(1<<20), float64(bound)/(1<<20), float64(slack>>20))
			if code != c.code || !strings.Contains(answer, c.want) {
				t.Errorf("answer %d %.300s; want %d with %q", code, answer, c.code, c.want)
			}
			if grown > bound+slack {
				t.Errorf("the server grew by %d bytes, more than %d + %d", grown, bound, slack)
			}
		})
	}
	if held := shared.requestMemoryHeld(t); held != "0" {
		t.Errorf("tt_model_request_memory_bytes is %s after every request was answered, want 0", held)
	}
}

// pi0.5's camera frames: a list of more frames than the policy has cameras is refused before any
// is decoded (each of these would keep 48 MiB once decoded), and the request memory budget bounds
// what frames waiting for the model hold: with one request prepared at a time and every serving
// call slowed down, concurrent requests beyond the budget get a 503 with Retry-After instead of
// piling up decoded frames, and the budget is all given back at the end.
func TestPI05FrameMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server: skipped with -short")
	}
	const budget = 160 << 20
	p := startServerProcess(t, buildBinary(t, t.TempDir(), "./cmd/tt-model-server", "tt-model-server"), map[string]string{
		"PI05_WEIGHTS_DIR": pi05TinyDir, "PI05_TOKENIZER": pi05Tokenizer, "PI05_PRECISION": "fp32",
		"PI05_ACTION_HORIZON": "6", "PI05_NUM_STEPS": "3", "PI05_NUM_IMAGES": "1", "TT_CPU_DEVICES": "1",
		"PI05_HTTP_THREADS": "1", "TT_MODEL_FAULT": "delay:ms=1500", "TT_REQUEST_MEMORY_MB": strconv.Itoa(budget >> 20),
	})
	// 4096×4096 RGB: the largest frame pi0.5 takes (16 Mi pixels); image/png decodes it into a
	// 64 MiB RGBA picture, copied into a 48 MiB RGB frame.
	frame := base64.StdEncoding.EncodeToString(imagememtest.PNG{Width: 4096, Height: 4096, Depth: 8, ColorType: 2}.Encode())

	t.Run("more frames than cameras", func(t *testing.T) {
		frames := make([]string, 40)
		for i := range frames {
			frames[i] = frame
		}
		body, _ := json.Marshal(map[string]any{"images": frames, "prompt": "pick"})
		code, answer, grown := p.postGrowth(t, "/predict", body)
		t.Logf("%d-byte body of 40 frames: %d, the server grew by %.1f MiB", len(body), code, float64(grown)/(1<<20))
		if code != 400 || !strings.Contains(answer, "images: got 40 images, this server takes 1 to 1 (PI05_NUM_IMAGES)") {
			t.Errorf("answer %d %.300s, want a 400 naming the count", code, answer)
		}
		if grown > slack {
			t.Errorf("the server grew by %d bytes, more than %d: frames were decoded", grown, slack)
		}
	})

	t.Run("budget", func(t *testing.T) {
		const n = 12 // unbounded, n decoded frames would wait for the one slot: over 570 MiB
		body, _ := json.Marshal(map[string]any{"images": []string{frame}, "prompt": "pick"})
		var mu sync.Mutex
		codes := map[int]int{}
		var refusal, retryAfter string
		var errs []error
		grown := p.growth(t, func() {
			var wg sync.WaitGroup
			for range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					code, retry, answer, err := p.post("/predict", body)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						errs = append(errs, err)
						return
					}
					codes[code]++
					if code == 503 {
						refusal, retryAfter = answer, retry
					}
				}()
			}
			wg.Wait()
		})
		for _, err := range errs {
			t.Error(err)
		}
		t.Logf("%d concurrent requests of one %d-byte frame: answers %v; the server grew by %.1f MiB (budget %d MiB)",
			n, len(frame), codes, float64(grown)/(1<<20), budget>>20)
		if codes[200] == 0 || codes[503] == 0 || codes[200]+codes[503] != n {
			t.Errorf("answers %v: want some 200s and the rest 503s", codes)
		}
		if !strings.Contains(refusal, "request memory budget full") || !strings.Contains(refusal, "(TT_REQUEST_MEMORY_MB)") || retryAfter != "1" {
			t.Errorf("503 %q with Retry-After %q: want the budget named and Retry-After 1", refusal, retryAfter)
		}
		// Live memory stays within the budget; the collector may let garbage (decoded pictures
		// already copied) reach as much again before it runs.
		if limit := int64(2*budget + slack); grown > limit {
			t.Errorf("the server grew by %d bytes, more than %d", grown, limit)
		}
		if held := p.requestMemoryHeld(t); held != "0" {
			t.Errorf("tt_model_request_memory_bytes is %s after every request was answered, want 0", held)
		}
	})
}
