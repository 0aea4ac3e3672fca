package pi05

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/ttmodel/tt-model/models/pi05/spm"
	"github.com/ttmodel/tt-model/models/safetensors"
	"golang.org/x/sys/unix"
)

// Policy is a loaded pi0.5 policy: tokenizer, statistics and the packed weights (Kernels), shared
// by every Device made from it. Server.TokenLen is the effective token buffer.
type Policy struct {
	Server     ServerConfig
	Config     PolicyConfig
	Dims       Dims
	WeightsDir string
	Tokenizer  *spm.Processor
	Norm       *Normalizer
	// Preset is what every device compiles: the server's cameras, the largest prompt bucket (the
	// kernels leave text padding out of the compute, so one program serves every bucket with the
	// same cost and result) and the horizon's action rows.
	Preset Preset
	// Cache is the exact prefix cache (PI05_PREFIX_CACHE_MB), shared by every device; nil when off.
	Cache *PrefixCache

	kernels Kernels
}

// LoadPolicy reads config.json, the tokenizer, the normalizer statistics and model.safetensors
// from dir, checks every tensor before loading any, and has build pack the weights. A nil build
// loads no weights: the policy then only prepares requests (tests of the pre-processing).
func LoadPolicy(ctx context.Context, srv ServerConfig, dir string, build Builder, log *slog.Logger) (*Policy, error) {
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
	buckets := PromptBuckets(srv.NumImages)
	p := &Policy{Server: srv, Config: cfg, Dims: ck.Dims, WeightsDir: dir, Tokenizer: tok, Norm: norm,
		Preset: Preset{Cams: srv.NumImages, TextBucket: buckets[len(buckets)-1], ActionRows: ActionRows(srv.ActionHorizon), MaxBatch: 1}}
	if srv.PrefixCacheMB > 0 {
		p.Cache = NewPrefixCache(int64(srv.PrefixCacheMB) << 20)
	}
	if build == nil {
		return p, nil
	}
	if p.kernels, err = build(ctx, ck, log); err != nil {
		return nil, fmt.Errorf("load %s: %w", ck.Path, err)
	}
	k := p.kernels.Describe()
	log.Info("pi05 loaded", "weights", dir, "precision", k.Precision, "isa", k.ISA, "packed_bytes", k.PackedBytes,
		"cameras", p.Preset.Cams, "action_rows", p.Preset.ActionRows, "token_len", srv.TokenLen, "normalizer", norm.Files)
	return p, nil
}

// Kernels describes the loaded weights (zero before a build).
func (p *Policy) Kernels() KernelInfo {
	if p.kernels == nil {
		return KernelInfo{}
	}
	return p.kernels.Describe()
}

// Close frees the weights; close every Device first.
func (p *Policy) Close() {
	if p.kernels != nil {
		_ = p.kernels.Close()
		p.kernels = nil
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

// Close unmaps the file; weights packed from it keep their own copy.
func (c *Checkpoint) Close() error { return c.file.Close() }

// Each hands every expected tensor to fn (its lerobot name, dtype F32 or BF16, shape and raw
// little-endian bytes), largest first, from `workers` goroutines at once (<= 0: GOMAXPROCS), so fn
// must be safe for concurrent calls on different tensors. The tensor's pages of the mapping are
// dropped right after fn returns: fn must copy (pack) what it keeps. So the resident set is the
// packed weights plus one source tensor per worker, and the big embedding table is in flight while
// little else is packed. Progress is logged every few seconds; the first error stops the walk.
func (c *Checkpoint) Each(ctx context.Context, log *slog.Logger, workers int, fn func(name, dtype string, shape []int, raw []byte) error) error {
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
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan item)
	var (
		mu       sync.Mutex
		firstErr error
		done     int64
		count    int
		last     = time.Now()
		wg       sync.WaitGroup
		doOne    = func(it item) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			raw, err := c.file.Bytes(it.file)
			if err == nil {
				err = fn(it.name, string(it.info.DType), it.info.Shape, raw)
			}
			if err != nil {
				return err
			}
			dropPages(raw)
			mu.Lock()
			defer mu.Unlock()
			done += int64(len(raw))
			count++
			if time.Since(last) > 2*time.Second || count == len(items) {
				log.Info("pi05 loading weights", "tensors", fmt.Sprintf("%d/%d", count, len(items)),
					"gb", fmt.Sprintf("%.2f/%.2f", float64(done)/1e9, float64(total)/1e9), "workers", workers)
				last = time.Now()
			}
			return nil
		}
	)
	for range min(workers, max(len(items), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range next {
				if err := doOne(it); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
				}
			}
		}()
	}
	for _, it := range items {
		if ctx.Err() != nil {
			break
		}
		next <- it
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
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
