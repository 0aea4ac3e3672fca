// Command pi05bench times the pi0.5 CPU megakernels on a checkpoint made by
// tools/reference/pi05.py (random weights, real names) and, in the same run, the PyTorch
// reference's bf16 sample: VISION, PREFIX, one EXPERT step, the whole sample, PREFIX GFLOP/s
// against the measured bf16 peak, peak RSS against the packed weights, a prefix-cache hit against a
// miss, and batched-EXPERT throughput. `make bench-pi05` runs it; docs/PERFORMANCE.md records the results.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ttmodel/tt-model/models/pi05"
	"github.com/ttmodel/tt-model/models/pi05/arch"
	"github.com/ttmodel/tt-model/models/pi05/pi05native"
	"github.com/ttmodel/tt-model/native"
	"golang.org/x/sys/unix"
)

type options struct {
	weights                        string
	threads, cams, tokens, horizon int
	steps, reps                    int
	batches                        string
	torch                          bool
	python                         string
}

func main() {
	var o options
	flag.StringVar(&o.weights, "weights", "", "checkpoint directory (model.safetensors + config.json)")
	flag.IntVar(&o.threads, "threads", 2, "kernel threads")
	flag.IntVar(&o.cams, "cams", 2, "cameras")
	flag.IntVar(&o.tokens, "tokens", 128, "prompt bucket (all tokens real)")
	flag.IntVar(&o.horizon, "horizon", 50, "action horizon")
	flag.IntVar(&o.steps, "steps", 10, "denoising steps")
	flag.IntVar(&o.reps, "reps", 3, "repetitions (the median is reported)")
	flag.StringVar(&o.batches, "batches", "1,2,4,8", "batched-expert sizes")
	flag.BoolVar(&o.torch, "torch", true, "also time the PyTorch reference (bf16) in this run")
	flag.StringVar(&o.python, "python", "/usr/bin/python3", "python with torch for the reference")
	flag.Parse()
	if o.weights == "" {
		fmt.Fprintln(os.Stderr, "pi05bench: -weights DIR is required")
		os.Exit(2)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "pi05bench:", err)
		os.Exit(1)
	}
}

// report is what the run prints as JSON (one object) at the end. GFLOP/s and ratios use the best
// times; the medians show how much the shared machine disturbed the run.
type report struct {
	Weights         string             `json:"weights"`
	Dims            arch.Dims          `json:"dims"`
	ISA             string             `json:"isa"`
	Threads         int                `json:"threads"`
	Cams            int                `json:"cams"`
	Tokens          int                `json:"tokens"`
	Horizon         int                `json:"horizon"`
	Steps           int                `json:"steps"`
	PrefixLen       int                `json:"prefix_len"`
	LoadAvg         string             `json:"loadavg_at_start"`
	PeakBF16GFLOPS  float64            `json:"peak_bf16_gflops"`
	PeakPerCPU      float64            `json:"peak_bf16_gflops_per_cpu_s"`
	LoadS           float64            `json:"load_s"`
	PackedBytes     int64              `json:"packed_bytes"`
	PeakRSSBytes    int64              `json:"peak_rss_bytes"`
	RSSOverPacked   float64            `json:"peak_rss_over_packed"`
	Vision          timing             `json:"vision"`
	Prefix          timing             `json:"prefix"`
	PrefixGFLOPS    float64            `json:"prefix_gflops"`
	PrefixVisGFLOPS float64            `json:"prefix_with_vision_gflops"`
	PrefixVisOfPeak float64            `json:"prefix_with_vision_of_peak"`
	PrefixVisPerCPU float64            `json:"prefix_with_vision_gflops_per_cpu_s"`
	PrefixVisOfCPU  float64            `json:"prefix_with_vision_per_cpu_of_peak_per_cpu"`
	Step            timing             `json:"expert_step"`
	StepGFLOPS      float64            `json:"expert_step_gflops"`
	Expert          timing             `json:"expert_all_steps"`
	SampleBestMS    float64            `json:"sample_best_ms"`
	SampleMedianMS  float64            `json:"sample_median_ms"`
	PrefixCache     prefixCacheResult  `json:"prefix_cache"`
	Batched         []batchResult      `json:"batched"`
	Torch           map[string]float64 `json:"torch,omitempty"`
}

// prefixCacheResult is the exact prefix cache at this width: a miss runs VISION, PREFIX and saves
// the prefix; a hit loads it; both then run the EXPERT.
type prefixCacheResult struct {
	BlobBytes   int     `json:"blob_bytes"`
	Save        timing  `json:"save"`
	Load        timing  `json:"load"`
	MissBestMS  float64 `json:"miss_best_ms"`
	HitBestMS   float64 `json:"hit_best_ms"`
	HitOverMiss float64 `json:"hit_over_miss"`
}

// batchResult is one batched-EXPERT size: one Euler step for nb requests.
type batchResult struct {
	NB           int     `json:"nb"`
	Packed       timing  `json:"packed"`
	Exact        timing  `json:"exact"`
	PerRequestMS float64 `json:"packed_per_request_best_ms"`
	RequestsPerS float64 `json:"packed_request_steps_per_s"`
	StepGFLOPS   float64 `json:"packed_gflops"`
}

func progress(format string, a ...any) { fmt.Fprintf(os.Stderr, "pi05bench: "+format+"\n", a...) }

func run(ctx context.Context, o options) error {
	rep := report{Weights: o.weights, Threads: o.threads, Cams: o.cams, Tokens: o.tokens, Horizon: o.horizon, Steps: o.steps}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		rep.LoadAvg = strings.TrimSpace(string(b))
	}
	rep.PeakBF16GFLOPS, rep.PeakPerCPU = peakBF16(o.threads)
	progress("measured bf16 peak %.0f GFLOP/s on %d threads, %.0f GFLOP per CPU-second (load average %s)",
		rep.PeakBF16GFLOPS, o.threads, rep.PeakPerCPU, rep.LoadAvg)

	t0 := time.Now()
	m, err := load(ctx, o.weights)
	if err != nil {
		return err
	}
	defer m.Close()
	rep.LoadS = time.Since(t0).Seconds()
	rep.Dims, rep.ISA, rep.PackedBytes = m.Dims(), m.ISA(), m.Bytes()
	progress("loaded %.2f GB packed in %.1f s (%s)", float64(rep.PackedBytes)/1e9, rep.LoadS, rep.ISA)

	maxNB := 1
	nbs, err := parseInts(o.batches)
	if err != nil {
		return err
	}
	for _, n := range nbs {
		maxNB = max(maxNB, n)
	}
	rows := 64
	if o.horizon <= 32 {
		rows = 32
	}
	prog, err := m.NewProgram(arch.Preset{Cams: o.cams, TextBucket: o.tokens, ActionRows: rows, MaxBatch: maxNB}, o.threads)
	if err != nil {
		return err
	}
	defer prog.Close()
	d := m.Dims()
	rng := rand.New(rand.NewSource(1))
	images := make([]float32, o.cams*3*d.Image*d.Image)
	for i := range images {
		images[i] = rng.Float32()*2 - 1
	}
	camMask := make([]bool, o.cams)
	for i := range camMask {
		camMask[i] = true
	}
	tokens, tokMask := make([]int32, o.tokens), make([]bool, o.tokens)
	for i := range tokens {
		tokens[i], tokMask[i] = int32(3+rng.Intn(d.Vocab-3)), true
	}
	noise := make([]float32, maxNB*o.horizon*d.ActionDim)
	for i := range noise {
		noise[i] = float32(rng.NormFloat64())
	}
	slabs := make([]*native.Pi05Slab, maxNB)
	for i := range slabs {
		if slabs[i], err = prog.NewSlab(); err != nil {
			return err
		}
		defer slabs[i].Close()
	}
	s := slabs[0]
	per := o.horizon * d.ActionDim

	rep.Vision = timeIt(o.reps, func() error { return prog.Vision(s, images, camMask) })
	rep.Prefix = timeIt(o.reps, func() error { return prog.Prefix(s, tokens, tokMask) })
	rep.PrefixLen = s.PrefixLen()
	fv, fp := m.FlopsVision(o.cams), m.FlopsPrefix(rep.PrefixLen)
	rep.PrefixGFLOPS = fp / rep.Prefix.Best / 1e6
	rep.PrefixVisGFLOPS = (fv + fp) / (rep.Vision.Best + rep.Prefix.Best) / 1e6
	rep.PrefixVisOfPeak = rep.PrefixVisGFLOPS / rep.PeakBF16GFLOPS
	rep.PrefixVisPerCPU = (fv + fp) / (rep.Vision.CPU + rep.Prefix.CPU) / 1e6
	rep.PrefixVisOfCPU = rep.PrefixVisPerCPU / rep.PeakPerCPU
	progress("vision + prefix: %.0f GFLOP per CPU-second = %.0f%% of the per-CPU-second peak", rep.PrefixVisPerCPU, 100*rep.PrefixVisOfCPU)
	progress("vision %.0f ms (median %.0f), prefix %.0f ms (median %.0f): %.0f GFLOP/s; with vision %.0f GFLOP/s = %.0f%% of peak",
		rep.Vision.Best, rep.Vision.Median, rep.Prefix.Best, rep.Prefix.Median, rep.PrefixGFLOPS, rep.PrefixVisGFLOPS, 100*rep.PrefixVisOfPeak)
	rep.Step = timeIt(o.reps, func() error { _, err := prog.Expert(s, noise[:per], o.horizon, 1); return err })
	stepFlops := m.FlopsExpertStep(rep.PrefixLen, o.horizon)
	rep.StepGFLOPS = stepFlops / rep.Step.Best / 1e6
	rep.Expert = timeIt(o.reps, func() error { _, err := prog.Expert(s, noise[:per], o.horizon, o.steps); return err })
	rep.SampleBestMS = rep.Vision.Best + rep.Prefix.Best + rep.Expert.Best
	rep.SampleMedianMS = rep.Vision.Median + rep.Prefix.Median + rep.Expert.Median
	progress("expert step %.1f ms (median %.1f, %.0f GFLOP/s), %d steps %.0f ms, sample %.0f ms (median %.0f)",
		rep.Step.Best, rep.Step.Median, rep.StepGFLOPS, o.steps, rep.Expert.Best, rep.SampleBestMS, rep.SampleMedianMS)

	var blob []byte
	pc := &rep.PrefixCache
	pc.Save = timeIt(o.reps, func() (err error) { blob, err = s.SavePrefix(); return err })
	pc.Load = timeIt(o.reps, func() error { return s.LoadPrefix(blob) })
	pc.BlobBytes = len(blob)
	pc.MissBestMS = rep.Vision.Best + rep.Prefix.Best + pc.Save.Best + rep.Expert.Best
	pc.HitBestMS = pc.Load.Best + rep.Expert.Best
	pc.HitOverMiss = pc.HitBestMS / pc.MissBestMS
	progress("prefix cache: %.1f MB per prefix, save %.1f ms, load %.1f ms: a hit %.0f ms, a miss %.0f ms (%.2fx)",
		float64(pc.BlobBytes)/1e6, pc.Save.Best, pc.Load.Best, pc.HitBestMS, pc.MissBestMS, pc.HitOverMiss)

	for _, sl := range slabs[1:] {
		if err := sl.CopyFrom(s); err != nil {
			return err
		}
	}
	for _, nb := range nbs {
		br := batchResult{NB: nb}
		br.Exact = timeIt(o.reps, func() error {
			_, err := prog.ExpertBatch(slabs[:nb], noise[:nb*per], o.horizon, 1, false)
			return err
		})
		br.Packed = timeIt(o.reps, func() error {
			_, err := prog.ExpertBatch(slabs[:nb], noise[:nb*per], o.horizon, 1, true)
			return err
		})
		br.PerRequestMS = br.Packed.Best / float64(nb)
		br.RequestsPerS = 1000 / br.Packed.Best * float64(nb)
		br.StepGFLOPS = stepFlops * float64(nb) / br.Packed.Best / 1e6
		rep.Batched = append(rep.Batched, br)
		progress("batched expert step nb=%d: packed %.1f ms per call (%.1f ms per request, %.0f GFLOP/s), exact %.1f ms",
			nb, br.Packed.Best, br.PerRequestMS, br.StepGFLOPS, br.Exact.Best)
	}
	rep.PeakRSSBytes = peakRSS()
	rep.RSSOverPacked = float64(rep.PeakRSSBytes) / float64(rep.PackedBytes)
	progress("peak RSS %.2f GB = %.2f x the packed weights", float64(rep.PeakRSSBytes)/1e9, rep.RSSOverPacked)

	if o.torch {
		prog.Close()
		m.Close()
		runtime.GC()
		if rep.Torch, err = torchBench(ctx, o); err != nil {
			return err
		}
		progress("pytorch bf16: %v", rep.Torch)
	}
	out, _ := json.MarshalIndent(rep, "", "  ")
	fmt.Println(string(out))
	return nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 8 {
			return nil, fmt.Errorf("batch size %q: want 1..8", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// timing is the wall time of reps runs in ms: the median and the best (on a shared machine the best
// is the closest to the uncontended speed), and the least process CPU time of a run (user + system,
// all threads: with one thread it is the work itself, whatever else the machine runs).
type timing struct {
	Median float64 `json:"median_ms"`
	Best   float64 `json:"best_ms"`
	CPU    float64 `json:"cpu_ms"`
}

func cpuMS() float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}

// timeIt runs fn reps times after one warm-up.
func timeIt(reps int, fn func() error) timing {
	if err := fn(); err != nil {
		fmt.Fprintln(os.Stderr, "pi05bench:", err)
		os.Exit(1)
	}
	reps = max(reps, 1)
	ts := make([]float64, 0, reps)
	cpu := math.Inf(1)
	for i := 0; i < reps; i++ {
		t, c := time.Now(), cpuMS()
		if err := fn(); err != nil {
			fmt.Fprintln(os.Stderr, "pi05bench:", err)
			os.Exit(1)
		}
		ts = append(ts, float64(time.Since(t).Microseconds())/1000)
		cpu = math.Min(cpu, cpuMS()-c)
	}
	sort.Float64s(ts)
	return timing{Median: ts[len(ts)/2], Best: ts[0], CPU: cpu}
}

// peakBF16 runs the vdpbf16ps microbenchmark on every thread at once and sums; perCPU is the same
// work per second of CPU time of one thread (the single-thread peak, whatever the machine's load).
func peakBF16(threads int) (total, perCPU float64) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < threads; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			g, _ := native.PeakGFLOPS("bf16", 200_000_000)
			mu.Lock()
			total += g
			mu.Unlock()
		}()
	}
	wg.Wait()
	t, c := time.Now(), cpuMS()
	g, _ := native.PeakGFLOPS("bf16", 200_000_000)
	if cpu := cpuMS() - c; cpu > 0 {
		perCPU = g * float64(time.Since(t).Milliseconds()) / cpu
	}
	return total, perCPU
}

func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// load streams the checkpoint into a bf16 model with the server's loader (models/pi05: every
// tensor checked first, then handed over largest first with its mapped pages dropped after packing),
// so the peak RSS measured is the server's.
func load(ctx context.Context, dir string) (*native.Pi05Model, error) {
	cfg, err := pi05.LoadPolicyConfig(dir)
	if err != nil {
		return nil, err
	}
	ck, err := pi05.OpenCheckpoint(dir, cfg)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	k, err := pi05native.Builder(pi05native.Options{Precision: native.BF16})(ctx, ck, log)
	if err != nil {
		return nil, err
	}
	m, _ := pi05native.Model(k)
	return m, nil
}

func torchBench(ctx context.Context, o options) (map[string]float64, error) {
	script := filepath.Join(filepath.Dir(os.Args[0]), "..", "tools", "reference", "pi05.py")
	if _, err := os.Stat(script); err != nil {
		script = filepath.Join("tools", "reference", "pi05.py")
	}
	cmd := exec.CommandContext(ctx, o.python, script, "bench", "--weights", o.weights, "--threads", strconv.Itoa(o.threads),
		"--cams", strconv.Itoa(o.cams), "--tokens", strconv.Itoa(o.tokens), "--horizon", strconv.Itoa(o.horizon),
		"--steps", strconv.Itoa(o.steps), "--reps", strconv.Itoa(o.reps))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	progress("running the PyTorch reference: %s", strings.Join(cmd.Args, " "))
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("pytorch reference: %w", err)
	}
	res := map[string]float64{}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		return nil, fmt.Errorf("pytorch reference output %q: %w", out.String(), err)
	}
	return res, nil
}
