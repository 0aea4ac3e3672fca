// Command enginebench measures the pi0.5 serving engine in one run, on one checkpoint (a
// full-width model of reduced depth, so a request takes seconds: `make bench-engine` makes it): closed-loop robots
// (tools/robotbench/robots) against tt-model-server started in each scenario, one after another:
//
//	today    one device, one request at a time (what the server did before the engine)
//	sp       one device holding every thread (PI05_LAYOUT=sp)
//	dp       2 devices x 1 thread (TT_CPU_DEVICES=2)
//	pd       1 prefix device + 1 expert device (PI05_LAYOUT=pd)
//	slo-b4   dp with PI05_SLO_MS = --slo-factor (2) x one request's cycle on dp (the p50 of one robot
//	         per device, measured in "dp"), batches of 4, R_max+1 robots: every admitted robot within
//	         the SLO, the extra one's 503 time
//	slo-b1   the same with PI05_MAX_BATCH=1
//
// and reports throughput at saturation, latencies, 503s and each server's resident memory (VmRSS
// after its sessions, and the peak VmHWM, which the weights' loading sets), with the ratios against
// "today" and the RSS of 2 devices against 1. Table on stdout, JSON with --json.
//
// Example: go run ./tools/enginebench --server bin/tt-model-server --weights build/pi05-v3l2 --duration 60s
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/ttmodel/tt-model/tools/robotbench/robots"
)

type options struct {
	server, weights, tokenizer string
	duration                   time.Duration
	saturation                 int
	sloFactor                  float64
	scenarios                  string
	jsonOut                    string
}

// Result is one scenario.
type Result struct {
	Scenario  string            `json:"scenario"`
	Env       map[string]string `json:"env"`
	Robots    int               `json:"robots"`
	Completed int               `json:"completed"`
	PerSecond float64           `json:"requests_per_s"`
	P50MS     float64           `json:"p50_ms_median_of_robots"`
	P99MS     float64           `json:"p99_ms_worst_robot"`
	Rejected  int               `json:"rejected_503"`
	RejectMS  float64           `json:"first_503_ms,omitempty"`
	Errors    int               `json:"errors"`
	WithinSLO *bool             `json:"admitted_within_slo,omitempty"`
	SLOMS     float64           `json:"slo_ms,omitempty"`
	RMax      int               `json:"r_max,omitempty"`
	PeakRSSMB float64           `json:"peak_rss_mb"`
	RSSMB     float64           `json:"rss_mb_after"`
	Session   robots.Session    `json:"session"`
	VsToday   float64           `json:"throughput_vs_today,omitempty"`
	LoadAvgAt string            `json:"loadavg_at_start"`
	Refused   string            `json:"refused,omitempty"` // the server\'s reason when it did not start
}

func main() {
	var o options
	flag.StringVar(&o.server, "server", "bin/tt-model-server", "the tt-model-server binary (make build)")
	flag.StringVar(&o.weights, "weights", "", "pi0.5 checkpoint directory (required)")
	flag.StringVar(&o.tokenizer, "tokenizer", "models/pi05/spm/testdata/bpe_tiny.model", "tokenizer.model")
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "each session's length")
	flag.IntVar(&o.saturation, "robots", 4, "robots of the saturation scenarios (today, sp, dp, pd)")
	flag.Float64Var(&o.sloFactor, "slo-factor", 2, "PI05_SLO_MS of the slo-* scenarios in lone dp requests (PI05_SLO_P99_MS: 1.25x that)")
	flag.StringVar(&o.scenarios, "scenarios", "today,sp,dp,pd,slo-b4,slo-b1", "scenarios to run, in order (slo-* need dp)")
	flag.StringVar(&o.jsonOut, "json", "", "write the results as JSON to this file")
	flag.Parse()
	if o.weights == "" {
		fmt.Fprintln(os.Stderr, "enginebench: --weights DIR is required")
		os.Exit(2)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "enginebench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	base := map[string]string{
		"PI05_WEIGHTS_DIR": o.weights, "PI05_TOKENIZER": o.tokenizer, "PI05_NUM_IMAGES": "2",
		"PI05_ACTION_HORIZON": "50", "PI05_NUM_STEPS": "10", "PI05_BATCH_WINDOW_MS": "0",
		"PI05_HANG_S":       "3600", // a loaded machine's slow call is not a hang here
		"PI05_ROBOT_IDLE_S": "2",
	}
	scenarios := map[string]map[string]string{
		"today":  {"TT_CPU_DEVICES": "1", "PI05_MAX_BATCH": "1"},
		"sp":     {"PI05_LAYOUT": "sp"},
		"dp":     {"TT_CPU_DEVICES": "2"},
		"pd":     {"TT_CPU_DEVICES": "2", "PI05_LAYOUT": "pd"},
		"slo-b4": {"TT_CPU_DEVICES": "2", "PI05_MAX_BATCH": "4"},
		"slo-b1": {"TT_CPU_DEVICES": "2", "PI05_MAX_BATCH": "1"},
	}
	var results []Result
	var today *Result
	var lone time.Duration // one request's cycle on "dp" (one robot per device): the SLO is set from it
	for _, name := range strings.Split(o.scenarios, ",") {
		extra, ok := scenarios[name]
		if !ok {
			return fmt.Errorf("--scenarios: unknown %q", name)
		}
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		for k, v := range extra {
			env[k] = v
		}
		slo := strings.HasPrefix(name, "slo-")
		if slo {
			if lone == 0 {
				return fmt.Errorf("%s needs the dp scenario first (its lone request sets the SLO)", name)
			}
			slo := time.Duration(o.sloFactor * float64(lone))
			env["PI05_SLO_MS"] = strconv.FormatInt(slo.Milliseconds(), 10)
			env["PI05_SLO_P99_MS"] = strconv.FormatInt(slo.Milliseconds()*5/4, 10)
		}
		r, first, err := scenario(ctx, o, name, env, func(url string) ([]int, error) {
			switch {
			case name == "dp": // one robot per device first: its latency sets the SLO scenarios'
				return []int{2, o.saturation}, nil
			case !slo:
				return []int{o.saturation}, nil
			}
			rmax, err := rMax(url)
			return []int{rmax + 1}, err
		})
		var refused *startError
		switch {
		case errors.As(err, &refused) && slo: // the SLO policy's refusal is a result
			r = Result{Scenario: name, Env: env, Refused: refused.log}
		case err != nil:
			return fmt.Errorf("%s: %w", name, err)
		}
		if name == "dp" {
			for _, rb := range first.PerRobot {
				lone = max(lone, time.Duration(rb.P50MS*float64(time.Millisecond)))
			}
			fmt.Fprintf(os.Stderr, "enginebench: one request per device on dp takes %s: the SLO scenarios use x%g\n", lone, o.sloFactor)
		}
		results = append(results, r)
		if name == "today" {
			today = &results[len(results)-1]
		}
	}
	for i := range results {
		if today != nil && today.PerSecond > 0 && !strings.HasPrefix(results[i].Scenario, "slo-") {
			results[i].VsToday = results[i].PerSecond / today.PerSecond
		}
	}
	printResults(os.Stdout, results)
	if o.jsonOut != "" {
		b, err := json.MarshalIndent(results, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(o.jsonOut, append(b, '\n'), 0o644)
	}
	return nil
}

// scenario starts a server with env, runs a session of closed-loop robots for each count of
// counts(url), and stops it; the result is the last session's, the first session is returned too.
func scenario(ctx context.Context, o options, name string, env map[string]string, counts func(url string) ([]int, error)) (Result, robots.Session, error) {
	fmt.Fprintf(os.Stderr, "enginebench: scenario %s: %v\n", name, env)
	load, _ := os.ReadFile("/proc/loadavg")
	srv, err := startServer(o, env)
	if err != nil {
		return Result{}, robots.Session{}, err
	}
	defer srv.stop()
	ns, err := counts(srv.url)
	if err != nil {
		return Result{}, robots.Session{}, err
	}
	sessions, err := robots.Run(ctx, robots.Options{URL: srv.url, Robots: ns, Duration: o.duration, Progress: os.Stderr}, os.Stderr)
	if err != nil {
		return Result{}, robots.Session{}, err
	}
	s, n := sessions[len(sessions)-1], ns[len(ns)-1]
	r := Result{Scenario: name, Env: env, Robots: n, Completed: s.Completed, PerSecond: s.Throughput, Rejected: s.Rejected,
		Errors: s.Errors, WithinSLO: s.WithinSLO, SLOMS: s.SLOMS, RMax: s.RMax, Session: s, PeakRSSMB: srv.statusMB("VmHWM:"),
		RSSMB:     srv.statusMB("VmRSS:"),
		LoadAvgAt: strings.TrimSpace(string(load))}
	var p50s []float64
	for _, rb := range s.PerRobot {
		if rb.Completed > 0 {
			p50s = append(p50s, rb.P50MS)
			r.P99MS = max(r.P99MS, rb.P99MS)
		}
		if rb.Rejected && (r.RejectMS == 0 || rb.RejectMS < r.RejectMS) {
			r.RejectMS = rb.RejectMS
		}
	}
	if len(p50s) > 0 {
		slices.Sort(p50s)
		r.P50MS = p50s[len(p50s)/2]
	}
	return r, sessions[0], nil
}

// server is one tt-model-server process.
type server struct {
	cmd  *exec.Cmd
	url  string
	done chan error
}

func startServer(o options, env map[string]string) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	cmd := exec.Command(o.server, "--model", "pi05", "--host", "127.0.0.1", "--port", port, "--log-level", "warn")
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out tail
	cmd.Stdout, cmd.Stderr = io.MultiWriter(os.Stderr, &out), io.MultiWriter(os.Stderr, &out)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, url: "http://127.0.0.1:" + port, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	for deadline := time.Now().Add(15 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		select {
		case err := <-s.done:
			return nil, &startError{err: err, log: out.last()}
		default:
		}
		if resp, err := http.Get(s.url + "/health"); err == nil {
			var h struct{ Status string }
			_ = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if h.Status == "ok" {
				return s, nil
			}
		}
	}
	s.stop()
	return nil, errors.New("the server was not ready in 15 minutes")
}

// statusMB is a memory line of the server's /proc status (VmHWM:, VmRSS:) in MB.
func (s *server) statusMB(field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// rMax reads megakernel.slo.r_max from /info.
func rMax(url string) (int, error) {
	resp, err := http.Get(url + "/info")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var in struct {
		Megakernel struct {
			SLO struct {
				RMax int `json:"r_max"`
			} `json:"slo"`
		} `json:"megakernel"`
	}
	err = json.NewDecoder(resp.Body).Decode(&in)
	return in.Megakernel.SLO.RMax, err
}

func printResults(w io.Writer, rs []Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\trobots\tcompleted\treq/s\tvs today\tp50 ms\tp99 ms\t503s\t503 after ms\twithin SLO\tRSS MB\tpeak RSS MB")
	for _, r := range rs {
		if r.Refused != "" {
			fmt.Fprintf(tw, "%s\trefused to start: %s\n", r.Scenario, r.Refused)
			continue
		}
		vs, within, rej := "-", "-", "-"
		if r.VsToday > 0 {
			vs = fmt.Sprintf("%.2fx", r.VsToday)
		}
		if r.WithinSLO != nil {
			within = fmt.Sprintf("%v (SLO %g ms, R_max %d)", *r.WithinSLO, r.SLOMS, r.RMax)
		}
		if r.RejectMS > 0 {
			rej = fmt.Sprintf("%.1f", r.RejectMS)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%s\t%.0f\t%.0f\t%d\t%s\t%s\t%.0f\t%.0f\n", r.Scenario, r.Robots, r.Completed, r.PerSecond, vs,
			r.P50MS, r.P99MS, r.Rejected, rej, within, r.RSSMB, r.PeakRSSMB)
	}
	tw.Flush()
	var one, two Result
	for _, r := range rs {
		switch r.Scenario {
		case "today":
			one = r
		case "dp":
			two = r
		}
	}
	if one.RSSMB > 0 && two.RSSMB > 0 {
		fmt.Fprintf(w, "RSS after serving, 2 devices / 1 device: %.3f; peak (loading): %.3f\n", two.RSSMB/one.RSSMB, two.PeakRSSMB/one.PeakRSSMB)
	}
}

// startError is a server that exited while starting, with its last log line.
type startError struct {
	err error
	log string
}

func (e *startError) Error() string {
	return fmt.Sprintf("the server exited while starting (%v): %s", e.err, e.log)
}

// tail keeps the last line written to it.
type tail struct {
	mu   sync.Mutex
	line []byte
	cur  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range p {
		if b == '\n' {
			t.line, t.cur = append(t.line[:0], t.cur...), t.cur[:0]
			continue
		}
		t.cur = append(t.cur, b)
	}
	return len(p), nil
}

func (t *tail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.line)
}
