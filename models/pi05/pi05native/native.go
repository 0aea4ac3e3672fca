// Package pi05native packs a checked pi0.5 checkpoint into the C megakernels (package native) and
// runs them behind models/pi05's Kernels, Program and Slab interfaces. It is kept apart from
// models/pi05 so that package builds and tests without cgo.
package pi05native

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/ttmodel/tt-model/models/pi05"
	"github.com/ttmodel/tt-model/native"
)

// Options choose the kernel path.
type Options struct {
	Precision native.Precision // BF16 (the default, ""), FP32 or Ref
	ISA       native.ISA       // ISABest, or a family forced for tests
}

// Builder returns a pi05.Builder that hands every tensor of the checkpoint, by name with its
// dtype, to a new native model.
func Builder(opts Options) pi05.Builder {
	return func(ctx context.Context, ck *pi05.Checkpoint, log *slog.Logger) (pi05.Kernels, error) {
		m, err := native.NewPi05Model(ck.Dims, opts.Precision, opts.ISA)
		if err != nil {
			return nil, err
		}
		err = ck.Each(ctx, log, func(name, dtype string, shape []int, raw []byte) error {
			_, err := m.SetTensor(name, native.DType(dtype), shape, raw)
			return err
		})
		if err == nil {
			err = m.Ready()
		}
		if err != nil {
			m.Close()
			return nil, err
		}
		return &kernels{m: m}, nil
	}
}

type kernels struct{ m *native.Pi05Model }

func (k *kernels) Describe() pi05.KernelInfo {
	return pi05.KernelInfo{ISA: k.m.ISA(), Precision: string(k.m.Precision()), PackedBytes: k.m.Bytes()}
}

func (k *kernels) NewProgram(p pi05.Preset, threads int) (pi05.Program, error) {
	prog, err := k.m.NewProgram(p, threads)
	if err != nil {
		return nil, err
	}
	return &program{p: prog}, nil
}

func (k *kernels) Close() error {
	k.m.Close()
	return nil
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
