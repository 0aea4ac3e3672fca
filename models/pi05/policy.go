package pi05

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/ttmodel/tt-model/models/pi05/spm"
	"github.com/ttmodel/tt-model/models/safetensors"
	"github.com/ttmodel/tt-model/native"
	"golang.org/x/sys/unix"
)

// LoadOptions choose the kernel path.
type LoadOptions struct {
	Precision native.Pi05Precision // PI05_PRECISION: bf16 (default), fp32 or ref
	Threads   int                  // <= 0: TT_NUM_THREADS or the CPUs of this process
	ISA       string               // "" = the best the CPU has
}

// Policy is a loaded pi0.5 policy: tokenizer, statistics, packed weights and one program for the
// server's preset. Server.TokenLen is the effective token buffer. Run serializes requests on the program (one request saturates the CPU).
type Policy struct {
	Server     ServerConfig
	Config     PolicyConfig
	Dims       Dims
	WeightsDir string
	Tokenizer  *spm.Processor
	Norm       *Normalizer
	Preset     native.Pi05Preset
	Cache      *PrefixCache // PI05_PREFIX_CACHE_MB; nil when off

	mu    sync.Mutex
	model *native.Pi05Model
	prog  *native.Pi05Program
	slab  *native.Pi05Slab
}

// LoadPolicy reads config.json, the tokenizer, the normalizer statistics and model.safetensors
// from dir, checks every tensor before loading any, and streams the weights into the kernels.
func LoadPolicy(ctx context.Context, srv ServerConfig, dir string, opts LoadOptions, log *slog.Logger) (*Policy, error) {
	cfg, err := LoadPolicyConfig(dir)
	if err != nil {
		return nil, err
	}
	tokPath := srv.TokenizerPath(dir)
	tok, err := spm.Load(tokPath)
	if err != nil {
		return nil, fmt.Errorf("tokenizer (PI05_TOKENIZER or tokenizer.model beside the weights): %w", err)
	}
	if tok.BOS() < 0 {
		return nil, fmt.Errorf("tokenizer %s has no BOS piece", tokPath)
	}
	norm, err := LoadNormalizer(dir, cfg)
	if err != nil {
		return nil, err
	}
	ck, err := OpenCheckpoint(dir, cfg)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	if tok.Size() > ck.Dims.Vocab {
		return nil, fmt.Errorf("tokenizer %s has %d pieces, more than the checkpoint's vocabulary %d", tokPath, tok.Size(), ck.Dims.Vocab)
	}
	srv.TokenLen = srv.EffectiveTokenLen(cfg)
	p := &Policy{Server: srv, Config: cfg, Dims: ck.Dims, WeightsDir: dir, Tokenizer: tok, Norm: norm}
	if srv.PrefixCacheMB > 0 {
		p.Cache = NewPrefixCache(int64(srv.PrefixCacheMB) << 20)
	}
	if p.model, err = ck.Load(ctx, opts, log); err != nil {
		return nil, err
	}
	// One program with the largest prompt bucket serves every bucket: the kernels leave text
	// padding out of the compute, so a request's bucket does not change its cost or result.
	buckets := PromptBuckets(srv.NumImages)
	p.Preset = native.Pi05Preset{Cams: srv.NumImages, TextBucket: buckets[len(buckets)-1],
		ActionRows: ActionRows(srv.ActionHorizon), MaxBatch: 1}
	if p.prog, err = p.model.NewProgram(p.Preset, opts.Threads); err != nil {
		p.Close()
		return nil, err
	}
	if p.slab, err = p.prog.NewSlab(); err != nil {
		p.Close()
		return nil, err
	}
	log.Info("pi05 loaded", "weights", dir, "precision", opts.Precision.String(), "isa", p.model.ISA(),
		"packed_bytes", p.model.Bytes(), "scratch_bytes", p.prog.ScratchBytes(), "threads", p.prog.Threads(),
		"cameras", p.Preset.Cams, "action_rows", p.Preset.ActionRows, "token_len", srv.TokenLen, "normalizer", norm.Files)
	return p, nil
}

// Native converts the dims to the kernels' struct.
func (d Dims) Native() native.Pi05Dims {
	return native.Pi05Dims{
		Image: d.Image, Patch: d.Patch,
		VisionWidth: d.VWidth, VisionLayers: d.VLayers, VisionHeads: d.VHeads, VisionMLP: d.VMLP,
		VisionEps: float32(d.VEps),
		Width:     d.LWidth, Layers: d.LLayers, Heads: d.LHeads, KVHeads: d.KVHeads, HeadDim: d.HeadDim,
		MLP: d.LMLP, Vocab: d.Vocab,
		ExpertWidth: d.EWidth, ExpertHeads: d.EHeads, ExpertMLP: d.EMLP,
		Eps: float32(d.LEps), ExpertEps: float32(d.EEps), RopeTheta: float32(d.RopeTheta),
		MinPeriod: d.MinPeriod, MaxPeriod: d.MaxPeriod, ActionDim: d.ActionDim,
	}
}

// Checkpoint is an opened model.safetensors whose tensors have all been checked.
type Checkpoint struct {
	Path  string
	Dims  Dims
	file  *safetensors.File
	names map[string]string // expected name -> the file's name for it
}

// OpenCheckpoint maps dir/model.safetensors, derives the dims (shapes + cfg) and checks every
// tensor, reporting all missing and mis-shaped ones by name, before anything is loaded.
func OpenCheckpoint(dir string, cfg PolicyConfig) (*Checkpoint, error) {
	path := filepath.Join(dir, "model.safetensors")
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	dims, err := InferDims(f, cfg, path)
	if err == nil {
		var names map[string]string
		if names, err = ResolveTensors(f, dims, path); err == nil {
			return &Checkpoint{Path: path, Dims: dims, file: f, names: names}, nil
		}
	}
	f.Close()
	return nil, err
}

// Close unmaps the file; a model loaded from it keeps its own packed copy.
func (c *Checkpoint) Close() error { return c.file.Close() }

// Load hands every tensor to a new native model, largest first: the model packs each one (an F32
// checkpoint becomes bf16) and its pages of the mapping are dropped right after, so the resident
// set is the packed weights plus one source tensor, and the big embedding table is in flight while
// little else is packed.
func (c *Checkpoint) Load(ctx context.Context, opts LoadOptions, log *slog.Logger) (*native.Pi05Model, error) {
	type item struct {
		name, file string
		info       safetensors.TensorInfo
	}
	items := make([]item, 0, len(c.names))
	var total int64
	for name, file := range c.names {
		info, _ := c.file.Info(file)
		items = append(items, item{name, file, info})
		total += info.End - info.Begin
	}
	sort.Slice(items, func(i, j int) bool {
		si, sj := items[i].info.End-items[i].info.Begin, items[j].info.End-items[j].info.Begin
		if si != sj {
			return si > sj
		}
		return items[i].name < items[j].name
	})
	m, err := native.NewPi05Model(c.Dims.Native(), opts.Precision, opts.ISA)
	if err != nil {
		return nil, err
	}
	var done int64
	last := time.Now()
	for i, it := range items {
		err := ctx.Err()
		var raw []byte
		if err == nil {
			raw, err = c.file.Bytes(it.file)
		}
		if err == nil {
			_, err = m.SetTensor(it.name, string(it.info.DType), it.info.Shape, raw)
		}
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("load %s: %w", c.Path, err)
		}
		dropPages(raw)
		done += int64(len(raw))
		if time.Since(last) > 2*time.Second || i == len(items)-1 {
			log.Info("pi05 loading weights", "tensors", fmt.Sprintf("%d/%d", i+1, len(items)),
				"gb", fmt.Sprintf("%.2f/%.2f", float64(done)/1e9, float64(total)/1e9))
			last = time.Now()
		}
	}
	if err := m.Ready(); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// dropPages tells the kernel the mapped source bytes are no longer needed, so they leave the
// resident set (they stay in the page cache). Only whole pages inside b are dropped.
func dropPages(b []byte) {
	page := uintptr(os.Getpagesize())
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := int((page - addr%page) % page)
	hi := len(b) - int((addr+uintptr(len(b)))%page)
	if hi-lo < int(page) {
		return
	}
	_ = unix.Madvise(b[lo:hi], unix.MADV_DONTNEED)
}

// Close frees the slab, the program and the weights.
func (p *Policy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.slab != nil {
		p.slab.Close()
	}
	if p.prog != nil {
		p.prog.Close()
	}
	if p.model != nil {
		p.model.Close()
	}
	p.slab, p.prog, p.model = nil, nil, nil
}

// Device describes where inference runs.
func (p *Policy) Device() string {
	return fmt.Sprintf("cpu (%s, %s, %d threads)", p.model.ISA(), p.model.Precision(), p.prog.Threads())
}

// Timing is where a request's time went.
type Timing struct {
	Vision, Prefix, Expert time.Duration
}

// Result is one action chunk.
type Result struct {
	Actions        [][]float32 // [horizon][action dim]
	Normalized     bool        // true when no action statistics were applied
	PrefixCacheHit bool        // VISION and PREFIX were skipped: the prefix came from the cache
	Timing         Timing
}

// Run executes VISION, PREFIX and EXPERT for a prepared request.
func (p *Policy) Run(ctx context.Context, in *Prepared) (*Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.prog == nil {
		return nil, fmt.Errorf("pi05: policy is closed")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var t Timing
	hit, err := p.prefix(p.prog, p.slab, in, &t)
	if err != nil {
		return nil, err
	}
	t2 := time.Now()
	h := p.Server.ActionHorizon
	flat, err := p.prog.ExpertGuided(p.slab, in.Noise, h, in.Steps, (*native.Pi05Guide)(in.Guide))
	if err != nil {
		return nil, err
	}
	t.Expert = time.Since(t2)

	ad, outDim := p.Dims.ActionDim, p.Config.ActionDim()
	actions := make([][]float32, h)
	for r := range actions {
		actions[r] = flat[r*ad : r*ad+outDim : r*ad+outDim]
	}
	normalized := !p.Norm.UnnormalizeActions(actions)
	return &Result{Actions: actions, Normalized: normalized, PrefixCacheHit: hit, Timing: t}, nil
}
