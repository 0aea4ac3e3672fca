// Package pi05native packs a checked pi0.5 checkpoint into the C megakernels (package native) and
// runs them behind models/pi05's Kernels, Program and Slab interfaces. It is kept apart from
// models/pi05 so that package builds and tests without cgo.
package pi05native

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ttmodel/tt-model/models/pi05"
	"github.com/ttmodel/tt-model/native"
	"github.com/ttmodel/tt-model/native/packcache"
)

// Options choose the kernel path, where packed weights are kept and how GEMMs are blocked.
type Options struct {
	Precision native.Precision // BF16 (the default, ""), FP32 or Ref
	ISA       native.ISA       // ISABest, or a family forced for tests
	// CacheDir keeps packed weights (native/packcache): when it holds this checkpoint's, they are
	// mapped instead of packed; otherwise the checkpoint is packed and the result written there in
	// the background. "" packs at every start.
	CacheDir string
	// Tuning gives every program its GEMM blocking plan (the zero value: the derived plan).
	Tuning native.GEMMTuning
	// Workers pack tensors at once (<= 0: GOMAXPROCS).
	Workers int
}

// Builder returns a pi05.Builder that maps the packed weights of the checkpoint from the cache, or
// hands every tensor of the checkpoint, by name with its dtype, to a new native model from several
// goroutines and keeps the packed result in the cache.
func Builder(opts Options) pi05.Builder {
	if opts.Precision == "" {
		opts.Precision = native.BF16
	}
	if opts.Tuning.Mode == "" {
		opts.Tuning.Mode = "off"
	}
	return func(ctx context.Context, ck *pi05.Checkpoint, log *slog.Logger) (pi05.Kernels, error) {
		start := time.Now()
		k := &kernels{tuning: opts.Tuning, log: log, plans: map[string]string{}}
		var key packcache.Key
		cacheDir := opts.CacheDir
		if cacheDir != "" {
			var m *native.Pi05Model
			var err error
			key, m, err = fromCache(ctx, opts, ck, log)
			if err != nil {
				if ctx.Err() != nil {
					return nil, err
				}
				// a cache that cannot be read is not a reason to fail: pack, and keep nothing
				log.Warn("pi05 packed weights cache unusable, packing without it", "dir", cacheDir, "err", err)
				cacheDir = ""
			}
			if m != nil {
				k.m = m
				log.Info("pi05 packed weights mapped", "file", key.FileName(), "dir", opts.CacheDir,
					"gb", float64(m.Bytes())/1e9, "seconds", time.Since(start).Seconds())
				return k, nil
			}
		}
		m, err := native.NewPi05Model(ck.Dims, opts.Precision, opts.ISA)
		if err != nil {
			return nil, err
		}
		err = ck.Each(ctx, log, opts.Workers, func(name, dtype string, shape []int, raw []byte) error {
			_, err := m.SetTensor(name, native.DType(dtype), shape, raw)
			return err
		})
		if err == nil {
			err = m.Ready()
		}
		if err != nil {
			_ = m.Close()
			return nil, err
		}
		k.m = m
		log.Info("pi05 packed from the checkpoint", "gb", float64(m.Bytes())/1e9, "seconds", time.Since(start).Seconds())
		if cacheDir != "" {
			k.stored = packcache.StoreInBackground(cacheDir, key, m.Packed(), "pi05", log)
		}
		return k, nil
	}
}

// fromCache maps the checkpoint's packed weights when the cache has them whole; else it returns the
// key to store them under, and a nil model.
func fromCache(ctx context.Context, opts Options, ck *pi05.Checkpoint, log *slog.Logger) (packcache.Key, *native.Pi05Model, error) {
	layout, err := native.Pi05LayoutID(ck.Dims, opts.Precision)
	if err != nil {
		return packcache.Key{}, nil, err
	}
	w := packcache.Wanted{Model: "pi05", What: "pi05", Checkpoint: ck.Path, Precision: string(opts.Precision), Layout: layout}
	return packcache.Open(ctx, opts.CacheDir, w, log, func(m *packcache.Mapped) (*native.Pi05Model, error) {
		return native.NewPi05ModelPacked(ck.Dims, opts.Precision, opts.ISA, m.Data, layout, m.Close)
	})
}

type kernels struct {
	m      *native.Pi05Model
	tuning native.GEMMTuning
	log    *slog.Logger
	stored *packcache.Pending // the packed weights being written to the cache, or nil

	mu sync.Mutex
	// plans are the GEMM plans programs got so far, by program shape: the serving engine's devices
	// share this one model and mostly one shape, so only the first of them tunes.
	plans map[string]string
}

// WaitStored waits until the packed weights of k (a Builder's Kernels) are in the cache, and
// returns the store's error; nil at once when nothing was being stored (mapped from the cache, or
// no cache). For tests and benchmarks.
func WaitStored(k pi05.Kernels) error {
	n, ok := k.(*kernels)
	if !ok {
		return nil
	}
	return n.stored.Wait()
}

func (k *kernels) Describe() pi05.KernelInfo {
	return pi05.KernelInfo{ISA: k.m.ISA(), Precision: string(k.m.Precision()), PackedBytes: k.m.Bytes()}
}

func (k *kernels) NewProgram(p pi05.Preset, threads int) (pi05.Program, error) {
	prog, err := k.m.NewProgram(p, threads)
	if err != nil {
		return nil, err
	}
	shape := fmt.Sprintf("pi05 %s %s threads=%d cams=%d bucket=%d rows=%d batch=%d layout=%016x", k.m.Precision(),
		k.m.ISA(), prog.Threads(), p.Cams, p.TextBucket, p.ActionRows, p.MaxBatch, k.m.LayoutID())
	if k.m.Precision() != native.Ref {
		if err := k.plan(prog, shape); err != nil {
			prog.Close()
			return nil, err
		}
	}
	return &program{p: prog}, nil
}

// plan gives prog the plan an earlier program of the same shape got, else the one k.tuning gives
// (tuning, when it does, one program at a time: timings taken side by side would disturb each other).
func (k *kernels) plan(prog *native.Pi05Program, shape string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p, ok := k.plans[shape]; ok {
		return prog.SetPlan(p)
	}
	p, err := k.tuning.Apply(prog, shape, k.log)
	if err != nil {
		return err
	}
	k.plans[shape] = p
	return nil
}

func (k *kernels) Close() error {
	k.stored.Stop()
	return k.m.Close()
}

// Model exposes the native model to tests and benchmarks (FLOP counts, tensor names).
func Model(k pi05.Kernels) (*native.Pi05Model, bool) {
	n, ok := k.(*kernels)
	if !ok {
		return nil, false
	}
	return n.m, true
}

type program struct{ p *native.Pi05Program }

type slab struct{ s *native.Pi05Slab }

func (s *slab) Bytes() int64 { return s.s.Bytes() }
func (s *slab) Close() error {
	s.s.Close()
	return nil
}

// native returns the native slab behind s, which must come from this package.
func nativeSlab(s pi05.Slab) (*native.Pi05Slab, error) {
	n, ok := s.(*slab)
	if !ok || n == nil {
		return nil, fmt.Errorf("pi05: a slab of another backend (%T)", s)
	}
	return n.s, nil
}

func (p *program) NewSlab() (pi05.Slab, error) {
	s, err := p.p.NewSlab()
	if err != nil {
		return nil, err
	}
	return &slab{s: s}, nil
}

func (p *program) Vision(s pi05.Slab, images []float32, camMask []bool) error {
	n, err := nativeSlab(s)
	if err != nil {
		return err
	}
	return p.p.Vision(n, images, camMask)
}

func (p *program) Prefix(s pi05.Slab, tokens []int32, mask []bool) error {
	n, err := nativeSlab(s)
	if err != nil {
		return err
	}
	return p.p.Prefix(n, tokens, mask)
}

func (p *program) ExpertBatch(slabs []pi05.Slab, noise []float32, horizon, steps int, pack bool, guides []*pi05.Guide) ([]float32, error) {
	ns := make([]*native.Pi05Slab, len(slabs))
	for i, s := range slabs {
		n, err := nativeSlab(s)
		if err != nil {
			return nil, err
		}
		ns[i] = n
	}
	var ng []*native.Pi05Guide
	if guides != nil {
		ng = make([]*native.Pi05Guide, len(guides))
		for i, g := range guides {
			ng[i] = (*native.Pi05Guide)(g) // the same fields: the kernels' pi05_guide
		}
	}
	return p.p.ExpertBatchGuided(ns, noise, horizon, steps, pack, ng)
}

func (p *program) SavePrefix(s pi05.Slab) ([]byte, error) {
	n, err := nativeSlab(s)
	if err != nil {
		return nil, err
	}
	return n.SavePrefix()
}

func (p *program) LoadPrefix(s pi05.Slab, blob []byte) error {
	n, err := nativeSlab(s)
	if err != nil {
		return err
	}
	return n.LoadPrefix(blob)
}

func (p *program) CopySlab(dst, src pi05.Slab) error {
	d, err := nativeSlab(dst)
	if err != nil {
		return err
	}
	s, err := nativeSlab(src)
	if err != nil {
		return err
	}
	return d.CopyFrom(s)
}

func (p *program) Pin(cpus []int) error { return p.p.Pin(cpus) }
func (p *program) Threads() int         { return p.p.Threads() }
func (p *program) ScratchBytes() int64  { return p.p.ScratchBytes() }
func (p *program) Close() error {
	p.p.Close()
	return nil
}
