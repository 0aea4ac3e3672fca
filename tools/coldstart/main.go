// Command coldstart measures how long the real tt-model-server takes from its start to ready
// (/health answers "ok": weights found, checked, packed or mapped, warmed up), for pi0.5 or
// RF-DETR: from safetensors with an empty packed-weights cache, then from the cache it wrote, and
// an exit-75 restart to ready under `tt-model supervise` (the server's test-only fault switch
// exits 75 after one prediction; the supervisor starts it again, from the cache). Every file the
// server reads is read through once before each start, so the page cache is warm and the numbers
// are CPU and memory work, not the disk's. It prints one table. `make bench-coldstart` runs it.
package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ttmodel/tt-model/internal/testing/syncbuf"
	"github.com/ttmodel/tt-model/models/rfdetr"
	"github.com/ttmodel/tt-model/native"
)

type options struct {
	model, weights, tokenizer, cache string
	server, ttmodel, precision       string
	runs, threads                    int
}

func main() {
	var o options
	flag.StringVar(&o.model, "model", "pi05", "pi05 or rf-detr")
	flag.StringVar(&o.weights, "weights", "", "checkpoint folder (rf-detr: a random full-size one is written there when it has none)")
	flag.StringVar(&o.tokenizer, "tokenizer", "models/pi05/spm/testdata/bpe_tiny.model", "pi0.5 tokenizer (the bench checkpoints have none)")
	flag.StringVar(&o.cache, "cache", "", "packed-weights cache folder for the runs (emptied first; default build/coldstart-cache/MODEL)")
	flag.StringVar(&o.server, "server", "bin/tt-model-server", "the server binary (make build)")
	flag.StringVar(&o.ttmodel, "tt-model", "bin/tt-model", "the tt-model binary, for supervise")
	flag.StringVar(&o.precision, "precision", "", "PI05_PRECISION / RFDETR_PRECISION (default: the model's)")
	flag.IntVar(&o.runs, "runs", 3, "starts from the cache (best and median reported)")
	flag.IntVar(&o.threads, "threads", 2, "TT_NUM_THREADS")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: coldstart -model pi05|rf-detr -weights DIR [flags]\n\nexample: make build && go run ./tools/coldstart -model pi05 -weights build/pi05-bench")
		flag.PrintDefaults()
	}
	flag.Parse()
	if o.weights == "" || (o.model != "pi05" && o.model != "rf-detr") {
		flag.Usage()
		os.Exit(2)
	}
	if o.cache == "" {
		o.cache = filepath.Join("build", "coldstart-cache", o.model)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "coldstart:", err)
		os.Exit(1)
	}
}

func progress(format string, a ...any) { fmt.Fprintf(os.Stderr, "coldstart: "+format+"\n", a...) }

// result is one measured start.
type result struct {
	ready  time.Duration
	detail string // what the server logged about loading
}

func run(o options) error {
	for _, b := range []string{o.server, o.ttmodel} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s: %w (run make build first)", b, err)
		}
	}
	if o.model == "rf-detr" {
		if _, err := os.Stat(filepath.Join(o.weights, rfdetr.WeightsFile)); errors.Is(err, os.ErrNotExist) {
			progress("writing a random full-size RF-DETR checkpoint to %s", o.weights)
			if err := (rfdetr.RandomCheckpoint{Seed: 1}).Write(o.weights); err != nil {
				return err
			}
		}
	}
	if err := os.RemoveAll(o.cache); err != nil {
		return err
	}
	if err := os.MkdirAll(o.cache, 0o755); err != nil {
		return err
	}
	load, _ := os.ReadFile("/proc/loadavg")

	progress("start 1: from safetensors, empty cache %s", o.cache)
	first, err := startOnce(o, "packed weights kept")
	if err != nil {
		return err
	}
	var fromCache []result
	for i := range o.runs {
		progress("start %d: from the packed cache", i+2)
		r, err := startOnce(o, "")
		if err != nil {
			return err
		}
		if !strings.Contains(r.detail, "packed weights mapped") {
			return fmt.Errorf("start %d did not map the packed weights: %s", i+2, r.detail)
		}
		fromCache = append(fromCache, r)
	}
	progress("exit 75 under tt-model supervise")
	restart, err := restartOnce(o)
	if err != nil {
		return err
	}
	packed := cacheBytes(o.cache)

	sort.Slice(fromCache, func(i, j int) bool { return fromCache[i].ready < fromCache[j].ready })
	fmt.Printf("\ncold start of tt-model-server (%s): %s; %d threads; %s\n", o.model, native.CPUModel(), o.threads, o.weights)
	fmt.Printf("load average at start: %s", load)
	fmt.Printf("page cache warm: every checkpoint and cache file read through before each start; packed weights %.2f GB\n\n", float64(packed)/1e9)
	fmt.Println("| start | start to ready | what the server logged |")
	fmt.Println("|---|---|---|")
	fmt.Printf("| from safetensors (empty cache) | %.2f s | %s |\n", first.ready.Seconds(), first.detail)
	fmt.Printf("| from the packed cache, best of %d (median) | %.2f s (%.2f s) | %s |\n", len(fromCache),
		fromCache[0].ready.Seconds(), fromCache[len(fromCache)/2].ready.Seconds(), fromCache[0].detail)
	fmt.Printf("| exit 75 -> ready again under tt-model supervise (from the cache) | %.2f s | %s |\n", restart.ready.Seconds(), restart.detail)
	return nil
}

// serverEnv is the server's environment for this model, the cache and a port.
func serverEnv(o options, port string) []string {
	env := append(os.Environ(), "TT_WEIGHT_CACHE="+absPath(o.cache), "TT_NUM_THREADS="+strconv.Itoa(o.threads), "PORT="+port)
	if o.model == "pi05" {
		env = append(env, "PI05_WEIGHTS_DIR="+absPath(o.weights), "PI05_TOKENIZER="+absPath(o.tokenizer))
		if o.precision != "" {
			env = append(env, "PI05_PRECISION="+o.precision)
		}
	} else {
		env = append(env, "TT_RF_DETR_WEIGHTS="+absPath(o.weights))
		if o.precision != "" {
			env = append(env, "RFDETR_PRECISION="+o.precision)
		}
	}
	return env
}

func absPath(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// warm reads every file under the checkpoint and the cache once, so the start measures the
// server, not the disk.
func warm(o options) {
	for _, dir := range []string{o.weights, o.cache} {
		_ = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
			if err == nil && info.Mode().IsRegular() {
				if f, err := os.Open(path); err == nil {
					_, _ = io.Copy(io.Discard, f)
					f.Close()
				}
			}
			return nil
		})
	}
}

// loadLines picks what the server said about loading (mapped or packed, and how long).
func loadLines(log string) string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		for _, key := range []string{"packed weights mapped", "packed from the checkpoint", "gemm plan", "warm-up complete"} {
			if strings.Contains(l, key) {
				if i := strings.Index(l, "msg="); i >= 0 {
					l = l[i:]
				}
				out = append(out, strings.ReplaceAll(l, "|", "/"))
			}
		}
	}
	return strings.Join(out, "; ")
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port, nil
}

// waitHealth polls /health until it answers "ok"; done closing first is an error.
func waitHealth(base string, done <-chan error, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return fmt.Errorf("exited while starting: %v", err)
		default:
		}
		if resp, err := http.Get(base + "/health"); err == nil {
			var h struct{ Status string }
			_ = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if h.Status == "ok" {
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("not ready in time")
}

// startOnce starts the server, times it to ready, waits for `until` in its log when given, and
// stops it with SIGTERM.
func startOnce(o options, until string) (result, error) {
	warm(o)
	port, err := freePort()
	if err != nil {
		return result{}, err
	}
	log := &syncbuf.Buffer{}
	cmd := exec.Command(o.server, "--host", "127.0.0.1", "--port", port)
	cmd.Env, cmd.Stdout, cmd.Stderr = serverEnv(o, port), log, log
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
	}
	if err := waitHealth("http://127.0.0.1:"+port, done, 15*time.Minute); err != nil {
		stop()
		return result{}, fmt.Errorf("server: %w\n%s", err, log)
	}
	r := result{ready: time.Since(t0)}
	progress("ready in %.2f s", r.ready.Seconds())
	if until != "" {
		for deadline := time.Now().Add(30 * time.Minute); !strings.Contains(log.String(), until); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				stop()
				return result{}, fmt.Errorf("no %q in the server's log:\n%s", until, log)
			}
		}
	}
	stop()
	r.detail = loadLines(log.String())
	return r, nil
}

// restartOnce runs the server under tt-model supervise with the fault switch armed, sends one
// prediction (the server answers it, then exits 75), and times the exit to ready again.
func restartOnce(o options) (result, error) {
	warm(o)
	port, err := freePort()
	if err != nil {
		return result{}, err
	}
	tmp, err := os.MkdirTemp("", "coldstart-supervise-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(tmp)
	log := &syncbuf.Buffer{}
	cmd := exec.Command(o.ttmodel, "supervise", "--reset-on-start", "never", "--hang-marker", filepath.Join(tmp, "hang_marker"),
		"--ready-url", "http://127.0.0.1:"+port+"/health", "--", absPath(o.server), "--host", "127.0.0.1", "--port", port)
	cmd.Env = append(serverEnv(o, port), "TT_MODEL_FAULT=exit:after=1")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
	}()
	base := "http://127.0.0.1:" + port
	if err := waitHealth(base, done, 15*time.Minute); err != nil {
		return result{}, fmt.Errorf("supervised server: %w\n%s", err, log)
	}
	body, err := predictBody(o.model)
	if err != nil {
		return result{}, err
	}
	resp, err := http.Post(base+"/predict", "application/json", bytes.NewReader(body))
	if err != nil {
		return result{}, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return result{}, fmt.Errorf("predict: %s\n%s", resp.Status, log)
	}
	t0 := time.Now()
	// the server exits 75 right after answering: wait until it is gone, then until it is back
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if r, err := http.Get(base + "/health"); err != nil {
			break
		} else {
			r.Body.Close()
		}
		if time.Now().After(deadline) {
			return result{}, fmt.Errorf("the server did not exit after the fault switch:\n%s", log)
		}
	}
	if err := waitHealth(base, done, 15*time.Minute); err != nil {
		return result{}, fmt.Errorf("restarted server: %w\n%s", err, log)
	}
	r := result{ready: time.Since(t0)}
	progress("ready again %.2f s after the exit-75 answer", r.ready.Seconds())
	l := log.String()
	if i := strings.LastIndex(l, "starting the server"); i >= 0 {
		l = l[i:]
	}
	r.detail = loadLines(l)
	return r, nil
}

// predictBody is one valid request of the model's /predict.
func predictBody(model string) ([]byte, error) {
	img := image.NewNRGBA(image.Rect(0, 0, 320, 240))
	for i := range img.Pix {
		img.Pix[i] = uint8(i*13 + i/1280)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return nil, err
	}
	enc := base64.StdEncoding.EncodeToString(b.Bytes())
	if model == "pi05" {
		return json.Marshal(map[string]any{"images": []string{enc}, "prompt": "pick up the cup", "seed": 1})
	}
	return json.Marshal(map[string]any{"image": enc})
}

func cacheBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(info.Name(), ".ttpack") {
			n += info.Size()
		}
		return nil
	})
	return n
}
