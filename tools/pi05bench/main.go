// Command pi05bench times the pi0.5 CPU megakernels on a checkpoint made by
// tools/reference/pi05.py (random weights, real names) against, in the same run, the strongest
// PyTorch 1.13 peer (tools/reference/pi05_peer.py): VISION, PREFIX, one EXPERT step and the whole
// sample, each side's GFLOP/s as a share of the bf16 peak measured in this run, the ratios, peak
// RSS against the packed weights; then a prefix-cache hit against a miss, batched-EXPERT
// throughput and the weight bytes one EXPERT step streams as a share of the streaming-read
// bandwidth measured in the same run. It prints one table (and -json FILE writes everything).
// `make bench-pi05` runs it; docs/PERFORMANCE.md records the results.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
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
	peer                           bool
	python                         string
	cache, tune, jsonOut           string
	batchedOnly                    bool
}

func main() {
	var o options
	flag.StringVar(&o.weights, "weights", "", "checkpoint directory (model.safetensors + config.json)")
	flag.IntVar(&o.threads, "threads", 2, "kernel threads (and the peer's)")
	flag.IntVar(&o.cams, "cams", 2, "cameras, all present")
	flag.IntVar(&o.tokens, "tokens", 128, "real prompt tokens (the prompt bucket is the smallest that holds them)")
	flag.IntVar(&o.horizon, "horizon", 50, "action horizon")
	flag.IntVar(&o.steps, "steps", 10, "denoising steps")
	flag.IntVar(&o.reps, "reps", 3, "timed repetitions after one warm-up (best and median reported)")
	flag.StringVar(&o.batches, "batches", "1,2,4,8", "batched-expert sizes")
	flag.BoolVar(&o.peer, "peer", true, "also time the PyTorch peer (tools/reference/pi05_peer.py) in this run")
	flag.StringVar(&o.python, "python", "/usr/bin/python3", "python with torch for the peer")
	flag.StringVar(&o.cache, "cache", "", "packed-weights cache folder: load from it when it holds this checkpoint (else pack and keep); empty packs from safetensors")
	flag.StringVar(&o.tune, "tune", "always", "GEMM plan: always (tune on this run's machine), auto (a kept plan from -cache), off (derived from the L1 size)")
	flag.StringVar(&o.jsonOut, "json", "", "also write every number as JSON to this file")
	flag.BoolVar(&o.batchedOnly, "batched-only", false, "time only the batched EXPERT step and the read bandwidth (VISION and PREFIX run once, untimed; no peer)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: pi05bench -weights DIR [flags]\n\nexample: go run ./tools/pi05bench -weights build/pi05-bench -cams 3 -tokens 20")
		flag.PrintDefaults()
	}
	flag.Parse()
	if o.weights == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "pi05bench:", err)
		os.Exit(1)
	}
}

// report is every number of a run. GFLOP/s and ratios use the best times; the medians show how
// much a shared machine disturbed the run.
type report struct {
	Weights        string             `json:"weights"`
	CPU            string             `json:"cpu"`
	Dims           arch.Dims          `json:"dims"`
	ISA            string             `json:"isa"`
	Plan           string             `json:"gemm_plan"`
	Threads        int                `json:"threads"`
	Cams           int                `json:"cams"`
	Tokens         int                `json:"tokens"`
	Bucket         int                `json:"bucket"`
	Horizon        int                `json:"horizon"`
	Steps          int                `json:"steps"`
	PrefixLen      int                `json:"prefix_len"`
	LoadAvg        string             `json:"loadavg_at_start"`
	PeakISA        string             `json:"peak_isa"` // the instructions of the peak: amxbf16 (tdpbf16ps) or avx512bf16 (vdpbf16ps)
	PeakBF16GFLOPS float64            `json:"peak_bf16_gflops"`
	PeakPerCPU     float64            `json:"peak_bf16_gflops_per_cpu_s"`
	VdpPeak        float64            `json:"vdpbf16ps_peak_gflops,omitempty"` // beside an AMX peak
	VdpPerCPU      float64            `json:"vdpbf16ps_peak_gflops_per_cpu_s,omitempty"`
	LoadS          float64            `json:"load_s"`
	PackedBytes    int64              `json:"packed_bytes"`
	PeakRSSBytes   int64              `json:"peak_rss_bytes"`
	Flops          map[string]float64 `json:"flops"` // per stage: vision, prefix, expert_step, sample
	Ours           map[string]timing  `json:"ours"`
	PrefixCache    prefixCacheResult  `json:"prefix_cache"`
	Batched        []batchResult      `json:"batched"`
	Stream         streamResult       `json:"stream"`
	Peer           *peerResult        `json:"peer,omitempty"`
}

// timing is the wall time of reps runs in ms: the best (on a shared machine, the closest to the
// uncontended speed), the median, and the least process CPU time of a run.
type timing struct {
	Best   float64 `json:"best_ms"`
	Median float64 `json:"median_ms"`
	CPU    float64 `json:"cpu_ms"`
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
	StepGFLOPS   float64 `json:"packed_gflops"`
}

// streamResult is the streaming-read bandwidth of this run against the weights one EXPERT step
// reads: a step that streamed only its weights at that bandwidth would take WeightsBytes / ReadGBps.
type streamResult struct {
	ReadGBps     float64 `json:"read_gbps"`     // best of readReps passes over readBytes, all threads
	WeightsBytes int64   `json:"weights_bytes"` // the expert linears one Euler step reads (packed)
	// WeightsShare is WeightsBytes / (one request's step, packed nb = 1, best) / ReadGBps.
	WeightsShare float64 `json:"weights_share"`
}

// peerResult is what pi05_peer.py bench printed.
type peerResult struct {
	Config       string            `json:"config"`
	LoadS        float64           `json:"load_s"`
	PeakRSSBytes int64             `json:"peak_rss_bytes"`
	Times        map[string]timing `json:"times"`
}

// stages in table order: the key, the label.
var stages = [][2]string{
	{"vision", "VISION"}, {"prefix", "PREFIX"}, {"vision_prefix", "VISION + PREFIX"},
	{"expert_step", "one EXPERT step"}, {"sample", "whole sample"},
}

func progress(format string, a ...any) { fmt.Fprintf(os.Stderr, "pi05bench: "+format+"\n", a...) }

func run(ctx context.Context, o options) error {
	bucket, err := pi05.SelectPromptBucket(o.cams, o.tokens, 0)
	if err != nil {
		return err
	}
	rep := report{Weights: o.weights, CPU: native.CPUModel(), Threads: o.threads, Cams: o.cams, Tokens: o.tokens,
		Bucket: bucket, Horizon: o.horizon, Steps: o.steps, Ours: map[string]timing{}, Flops: map[string]float64{}}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		rep.LoadAvg = strings.TrimSpace(string(b))
	}
	peakISA, err := native.PeakISA("bf16")
	if err != nil {
		return err
	}
	rep.PeakISA = string(peakISA)
	rep.PeakBF16GFLOPS, rep.PeakPerCPU = peakBF16(native.ISABest, o.threads)
	progress("bf16 peak (%s) %.0f GFLOP/s on %d threads (%.0f per CPU-second), load average %s",
		peakISA, rep.PeakBF16GFLOPS, o.threads, rep.PeakPerCPU, rep.LoadAvg)
	if peakISA == native.ISAAMXBF16 {
		rep.VdpPeak, rep.VdpPerCPU = peakBF16(native.ISAAVX512BF16, o.threads)
		progress("vdpbf16ps peak beside it %.0f GFLOP/s (%.0f per CPU-second)", rep.VdpPeak, rep.VdpPerCPU)
	}

	t0 := time.Now()
	k, m, err := load(ctx, o)
	if err != nil {
		return err
	}
	rep.LoadS = time.Since(t0).Seconds()
	rep.Dims, rep.ISA, rep.PackedBytes = m.Dims(), m.ISA(), m.Bytes()
	progress("loaded %.2f GB packed in %.1f s (%s)", float64(rep.PackedBytes)/1e9, rep.LoadS, rep.ISA)

	if err := measure(o, m, &rep); err != nil {
		_ = k.Close()
		return err
	}
	rep.PeakRSSBytes = peakRSS()
	if err := k.Close(); err != nil {
		return err
	}
	if o.peer && !o.batchedOnly {
		runtime.GC()
		if rep.Peer, err = peerBench(ctx, o); err != nil {
			return err
		}
	}
	printTable(os.Stdout, &rep)
	if o.jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(o.jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// measure runs every stage of one request (and the batched and prefix-cache extras) on a program
// of m with the GEMM plan -tune asks for.
func measure(o options, m *native.Pi05Model, rep *report) error {
	nbs, err := parseInts(o.batches)
	if err != nil {
		return err
	}
	maxNB := slicesMax(nbs)
	preset := arch.Preset{Cams: o.cams, TextBucket: rep.Bucket, ActionRows: pi05.ActionRows(o.horizon), MaxBatch: maxNB}
	prog, err := m.NewProgram(preset, o.threads)
	if err != nil {
		return err
	}
	defer prog.Close()
	tuning := native.GEMMTuning{Mode: o.tune, Dir: o.cache}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if rep.Plan, err = tuning.Apply(prog, fmt.Sprintf("pi05bench threads=%d preset=%+v layout=%016x", prog.Threads(), preset, m.LayoutID()), log); err != nil {
		return err
	}
	progress("gemm plan %s", rep.Plan)

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
	tokens, tokMask := make([]int32, rep.Bucket), make([]bool, rep.Bucket)
	for i := range o.tokens {
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

	f := rep.Flops
	if o.batchedOnly {
		if err := prog.Vision(s, images, camMask); err != nil {
			return err
		}
		if err := prog.Prefix(s, tokens, tokMask); err != nil {
			return err
		}
		rep.PrefixLen = s.PrefixLen()
		f["expert_step"] = m.FlopsExpertStep(rep.PrefixLen, o.horizon)
		return measureBatched(o, m, prog, slabs, noise, rep)
	}
	t := rep.Ours
	t["vision"] = timeIt(o.reps, func() error { return prog.Vision(s, images, camMask) })
	t["prefix"] = timeIt(o.reps, func() error { return prog.Prefix(s, tokens, tokMask) })
	rep.PrefixLen = s.PrefixLen()
	t["expert_step"] = timeIt(o.reps, func() error { _, err := prog.Expert(s, noise[:per], o.horizon, 1); return err })
	expert := timeIt(o.reps, func() error { _, err := prog.Expert(s, noise[:per], o.horizon, o.steps); return err })
	t["vision_prefix"] = sum(t["vision"], t["prefix"])
	t["sample"] = sum(t["vision_prefix"], expert)
	f["vision"], f["prefix"] = m.FlopsVision(o.cams), m.FlopsPrefix(rep.PrefixLen)
	f["vision_prefix"] = f["vision"] + f["prefix"]
	f["expert_step"] = m.FlopsExpertStep(rep.PrefixLen, o.horizon)
	f["sample"] = f["vision_prefix"] + float64(o.steps)*f["expert_step"]
	for _, st := range stages {
		progress("%s: best %.1f ms (median %.1f), %.0f GFLOP/s", st[1], t[st[0]].Best, t[st[0]].Median, f[st[0]]/t[st[0]].Best/1e6)
	}

	var blob []byte
	pc := &rep.PrefixCache
	pc.Save = timeIt(o.reps, func() (err error) { blob, err = s.SavePrefix(); return err })
	pc.Load = timeIt(o.reps, func() error { return s.LoadPrefix(blob) })
	pc.BlobBytes = len(blob)
	pc.MissBestMS = t["vision_prefix"].Best + pc.Save.Best + expert.Best
	pc.HitBestMS = pc.Load.Best + expert.Best
	pc.HitOverMiss = pc.HitBestMS / pc.MissBestMS
	return measureBatched(o, m, prog, slabs, noise, rep)
}

// measureBatched times one Euler step of nb requests (packed and per request) for each -batches
// size, every slab a copy of slabs[0], then the streaming-read bandwidth.
func measureBatched(o options, m *native.Pi05Model, prog *native.Pi05Program, slabs []*native.Pi05Slab, noise []float32, rep *report) error {
	nbs, err := parseInts(o.batches)
	if err != nil {
		return err
	}
	f := rep.Flops
	per := o.horizon * m.Dims().ActionDim
	for _, sl := range slabs[1:] {
		if err := sl.CopyFrom(slabs[0]); err != nil {
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
		br.StepGFLOPS = f["expert_step"] * float64(nb) / br.Packed.Best / 1e6
		rep.Batched = append(rep.Batched, br)
		progress("batched nb=%d: packed %.1f ms per call, exact mode %.1f ms", nb, br.Packed.Best, br.Exact.Best)
	}
	st := &rep.Stream
	st.ReadGBps = readBandwidth(o.threads)
	st.WeightsBytes = expertStepWeightBytes(m.Dims())
	for _, b := range rep.Batched {
		if b.NB == 1 && st.ReadGBps > 0 {
			st.WeightsShare = float64(st.WeightsBytes) / (b.Packed.Best / 1e3) / (st.ReadGBps * 1e9)
		}
	}
	progress("streaming read %.1f GB/s; one EXPERT step reads %.2f GB of weights", st.ReadGBps, float64(st.WeightsBytes)/1e9)
	return nil
}

// expertStepWeightBytes is what one Euler step streams of the packed weights: per layer the bf16
// q/k/v, o, gate/up and down, plus the fp32 action in/out projections (the adaRMS modulations and
// the time MLP run once per call, before the steps).
func expertStepWeightBytes(d arch.Dims) int64 {
	ew, q, kv, mlp := int64(d.EWidth), int64(d.EHeads*d.HeadDim), int64(d.KVHeads*d.HeadDim), int64(d.EMLP)
	perLayer := ew*(q+2*kv) + q*ew + 2*ew*mlp + mlp*ew
	return 2*int64(d.LLayers)*perLayer + 4*2*ew*int64(d.ActionDim)
}

// readBandwidth is the best of readReps passes of `threads` goroutines summing disjoint parts of
// a buffer of readBytes (far past any cache) in GB/s: the rate at which this machine streams
// memory into the cores right now.
func readBandwidth(threads int) float64 {
	const readBytes, readReps = 1 << 30, 5
	buf := make([]uint64, readBytes/8)
	for i := range buf {
		buf[i] = uint64(i)
	}
	threads = max(threads, 1)
	part := len(buf) / threads
	sums := make([]uint64, threads)
	best := math.Inf(1)
	for range readReps {
		var wg sync.WaitGroup
		t0 := time.Now()
		for w := range threads {
			wg.Add(1)
			go func(s []uint64) {
				defer wg.Done()
				var a, b, c, d uint64
				for i := 0; i+4 <= len(s); i += 4 {
					v := s[i : i+4 : i+4]
					a, b, c, d = a+v[0], b+v[1], c+v[2], d+v[3]
				}
				sums[w] = a + b + c + d
			}(buf[w*part : (w+1)*part])
		}
		wg.Wait()
		best = min(best, time.Since(t0).Seconds())
	}
	runtime.KeepAlive(sums)
	return float64(part*threads*8) / best / 1e9
}

func sum(a, b timing) timing {
	return timing{Best: a.Best + b.Best, Median: a.Median + b.Median, CPU: a.CPU + b.CPU}
}

func slicesMax(v []int) int {
	m := 1
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// printTable writes the run as one markdown table, then the extras.
func printTable(w io.Writer, r *report) {
	fmt.Fprintf(w, "\npi0.5 bench: %s; %d threads; %d cameras + %d prompt tokens (bucket %d, %d prefix rows), horizon %d, %d steps\n",
		r.CPU, r.Threads, r.Cams, r.Tokens, r.Bucket, r.PrefixLen, r.Horizon, r.Steps)
	instr := "vdpbf16ps in registers"
	if r.PeakISA == string(native.ISAAMXBF16) {
		instr = fmt.Sprintf("AMX tdpbf16ps on register tiles; vdpbf16ps beside it: %.0f GFLOP/s", r.VdpPeak)
	}
	fmt.Fprintf(w, "bf16 peak measured in this run: %.0f GFLOP/s on %d threads (%s); load average at start %s\n",
		r.PeakBF16GFLOPS, r.Threads, instr, r.LoadAvg)
	fmt.Fprintf(w, "ours: kernels/pi05 bf16, %s, GEMM plan %s, %.2f GB packed, loaded in %.1f s\n", r.ISA, r.Plan, float64(r.PackedBytes)/1e9, r.LoadS)
	if r.Peer != nil {
		fmt.Fprintf(w, "peer: %s (converted in %.1f s)\n", r.Peer.Config, r.Peer.LoadS)
	}
	if len(r.Ours) > 0 {
		printStages(w, r)
	}
	pc := r.PrefixCache
	if len(r.Ours) > 0 {
		fmt.Fprintf(w, "\nprefix cache: %.1f MB per prefix, save %.1f ms, load %.1f ms: a hit %.0f ms against a miss %.0f ms (%.2fx)\n",
			float64(pc.BlobBytes)/1e6, pc.Save.Best, pc.Load.Best, pc.HitBestMS, pc.MissBestMS, pc.HitOverMiss)
	}
	fmt.Fprintln(w, "batched EXPERT step (one Euler step, nb requests, each its own slab):")
	var one float64
	for _, b := range r.Batched {
		if b.NB == 1 {
			one = b.Packed.Best
		}
	}
	for _, b := range r.Batched {
		ratio := ""
		if one > 0 {
			ratio = fmt.Sprintf(" = %.2fx nb=1's call", b.Packed.Best/one)
		}
		fmt.Fprintf(w, "  nb=%d: packed %.1f ms (median %.1f, least CPU %.0f ms) per call%s = %.1f ms per request (%.0f GFLOP/s); exact mode %.1f ms (least CPU %.0f ms) per call\n",
			b.NB, b.Packed.Best, b.Packed.Median, b.Packed.CPU, ratio, b.PerRequestMS, b.StepGFLOPS, b.Exact.Best, b.Exact.CPU)
	}
	st := r.Stream
	fmt.Fprintf(w, "streaming read (%d threads, 1 GiB, best of 5): %.1f GB/s; one EXPERT step streams %.3f GB of weights: at nb=1 %.0f%% of that bandwidth\n",
		r.Threads, st.ReadGBps, float64(st.WeightsBytes)/1e9, 100*st.WeightsShare)
}

// printStages writes the table of the stages, ours against the peer's.
func printStages(w io.Writer, r *report) {
	fmt.Fprintln(w, "\n| stage | ours best (median) | ours GFLOP/s | % of peak | peer best (median) | peer GFLOP/s | % of peak | ours / peer |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, st := range stages {
		o := r.Ours[st[0]]
		g := r.Flops[st[0]] / o.Best / 1e6
		row := fmt.Sprintf("| %s | %s | %.0f | %.0f%% |", st[1], ms(o), g, 100*g/r.PeakBF16GFLOPS)
		if r.Peer != nil {
			p := r.Peer.Times[st[0]]
			pg := r.Flops[st[0]] / p.Best / 1e6
			row += fmt.Sprintf(" %s | %.0f | %.0f%% | **%.2fx** |", ms(p), pg, 100*pg/r.PeakBF16GFLOPS, o.Best/p.Best)
		} else {
			row += " | | | |"
		}
		fmt.Fprintln(w, row)
	}
	rss := fmt.Sprintf("| peak RSS | %.2f GB = %.2fx the packed weights | | |", float64(r.PeakRSSBytes)/1e9, float64(r.PeakRSSBytes)/float64(r.PackedBytes))
	if r.Peer != nil {
		rss += fmt.Sprintf(" %.2f GB = %.2fx | | | %.2fx |", float64(r.Peer.PeakRSSBytes)/1e9, float64(r.Peer.PeakRSSBytes)/float64(r.PackedBytes),
			float64(r.PeakRSSBytes)/float64(r.Peer.PeakRSSBytes))
	} else {
		rss += " | | | |"
	}
	fmt.Fprintln(w, rss)
}

func ms(t timing) string {
	if t.Best >= 1000 {
		return fmt.Sprintf("%.2f s (%.2f)", t.Best/1000, t.Median/1000)
	}
	return fmt.Sprintf("%.1f ms (%.1f)", t.Best, t.Median)
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

// peakBF16 runs the bf16 peak microbenchmark of isa (ISABest: what the GEMM uses, tdpbf16ps on an
// AMX machine) on every thread at once and sums; perCPU is the same work per second of CPU time of
// one thread (the single-thread peak, whatever the machine's load).
func peakBF16(isa native.ISA, threads int) (total, perCPU float64) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < threads; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			g, _ := native.PeakGFLOPS(isa, "bf16", 200_000_000)
			mu.Lock()
			total += g
			mu.Unlock()
		}()
	}
	wg.Wait()
	t, c := time.Now(), cpuMS()
	g, _ := native.PeakGFLOPS(isa, "bf16", 200_000_000)
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

// load brings the checkpoint in with the server's loader (models/pi05: every tensor checked first,
// then packed from several goroutines, largest first, mapped pages dropped after packing; or
// mapped from -cache), so the load time and peak RSS measured are the server's.
func load(ctx context.Context, o options) (pi05.Kernels, *native.Pi05Model, error) {
	cfg, err := pi05.LoadPolicyConfig(o.weights)
	if err != nil {
		return nil, nil, err
	}
	ck, err := pi05.OpenCheckpoint(o.weights, cfg)
	if err != nil {
		return nil, nil, err
	}
	defer ck.Close()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	k, err := pi05native.Builder(pi05native.Options{Precision: native.BF16, CacheDir: o.cache})(ctx, ck, log)
	if err != nil {
		return nil, nil, err
	}
	if err := pi05native.WaitStored(k); err != nil {
		progress("packed weights not kept: %v", err)
	}
	m, _ := pi05native.Model(k)
	return k, m, nil
}

// peerBench runs tools/reference/pi05_peer.py bench on the same checkpoint and request shape.
func peerBench(ctx context.Context, o options) (*peerResult, error) {
	script := filepath.Join("tools", "reference", "pi05_peer.py")
	cmd := exec.CommandContext(ctx, o.python, script, "bench", "--weights", o.weights, "--threads", strconv.Itoa(o.threads),
		"--cams", strconv.Itoa(o.cams), "--tokens", strconv.Itoa(o.tokens), "--horizon", strconv.Itoa(o.horizon),
		"--steps", strconv.Itoa(o.steps), "--reps", strconv.Itoa(o.reps))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	progress("running the PyTorch peer: %s", strings.Join(cmd.Args, " "))
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("pytorch peer: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var raw struct {
		Config       string             `json:"config"`
		LoadS        float64            `json:"load_s"`
		PeakRSSBytes int64              `json:"peak_rss_bytes"`
		Seconds      map[string]float64 `json:"seconds"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &raw); err != nil {
		return nil, fmt.Errorf("pytorch peer output %q: %w", out.String(), err)
	}
	p := &peerResult{Config: raw.Config, LoadS: raw.LoadS, PeakRSSBytes: raw.PeakRSSBytes, Times: map[string]timing{}}
	for _, st := range stages {
		best, ok1 := raw.Seconds[st[0]+"_best"]
		med, ok2 := raw.Seconds[st[0]+"_median"]
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("pytorch peer output lacks %s", st[0])
		}
		p.Times[st[0]] = timing{Best: best * 1000, Median: med * 1000}
	}
	return p, nil
}
