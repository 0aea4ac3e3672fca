package pi05

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Device is one Program of a policy's weights with its slabs: the unit that serves requests (the
// CPU stand-in for one chip). A slot is one slab: a request's state between its PREFIX and its
// EXPERT. Its methods are not for concurrent use.
type Device struct {
	policy *Policy
	prog   Program
	slabs  []Slab
}

// NewDevice compiles the policy's preset with room for batched EXPERTs of maxBatch requests, on a
// pool of threads (<= 0: TT_NUM_THREADS or every CPU), with slots slabs (at least maxBatch).
func (p *Policy) NewDevice(threads, maxBatch, slots int) (*Device, error) {
	if p.kernels == nil {
		return nil, errors.New("pi05: the policy was loaded without weights")
	}
	preset := p.Preset
	preset.MaxBatch = max(maxBatch, 1)
	prog, err := p.kernels.NewProgram(preset, threads)
	if err != nil {
		return nil, err
	}
	d := &Device{policy: p, prog: prog}
	for range max(slots, preset.MaxBatch) {
		s, err := prog.NewSlab()
		if err != nil {
			d.Close()
			return nil, err
		}
		d.slabs = append(d.slabs, s)
	}
	return d, nil
}

// Pin pins the device's pool thread i (1..Threads()-1) to cpus[i % len(cpus)]; the thread that
// calls the device pins itself to cpus[0].
func (d *Device) Pin(cpus []int) error { return d.prog.Pin(cpus) }

// Threads is the size of the device's thread pool.
func (d *Device) Threads() int { return d.prog.Threads() }

// Slots is the number of requests the device can hold between PREFIX and EXPERT.
func (d *Device) Slots() int { return len(d.slabs) }

// ScratchBytes is the device's own memory: the program's scratch and its slabs.
func (d *Device) ScratchBytes() int64 {
	n := d.prog.ScratchBytes()
	for _, s := range d.slabs {
		n += s.Bytes()
	}
	return n
}

// Close frees the slabs and the program (not the policy's weights).
func (d *Device) Close() {
	for _, s := range d.slabs {
		_ = s.Close()
	}
	d.slabs = nil
	if d.prog != nil {
		_ = d.prog.Close()
		d.prog = nil
	}
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
	BatchedAs      int // the requests its EXPERT ran with (1 = alone)
}

// Run executes VISION, PREFIX and EXPERT for one prepared request in slot 0.
func (d *Device) Run(ctx context.Context, in *Prepared) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t, hit, err := d.Prefix(0, in)
	if err != nil {
		return nil, err
	}
	res, err := d.Expert([]int{0}, []*Prepared{in}, true)
	if err != nil {
		return nil, err
	}
	res[0].Timing.Vision, res[0].Timing.Prefix, res[0].PrefixCacheHit = t.Vision, t.Prefix, hit
	return res[0], nil
}

func (d *Device) slot(i int) (Slab, error) {
	if d.prog == nil {
		return nil, errors.New("pi05: device is closed")
	}
	if i < 0 || i >= len(d.slabs) {
		return nil, fmt.Errorf("pi05: slot %d outside 0..%d", i, len(d.slabs)-1)
	}
	return d.slabs[i], nil
}

// Prefix leaves one request's prefix in a slot: VISION and PREFIX, or the policy's prefix cache
// (hit reports it); the Timing has Vision and Prefix.
func (d *Device) Prefix(slot int, in *Prepared) (t Timing, hit bool, err error) {
	s, err := d.slot(slot)
	if err != nil {
		return Timing{}, false, err
	}
	hit, err = d.policy.prefix(d.prog, s, in, &t)
	return t, hit, err
}

// Expert runs the batched EXPERT over the requests whose prefixes are in slots: one call per
// distinct step count (requests of one call share it). pack shares each linear's GEMM across the
// requests (pack=false runs them one by one); either way every request's actions are
// bit-identical to the same request alone. Results are in the order of ins, each with
// its EXPERT time and BatchedAs.
func (d *Device) Expert(slots []int, ins []*Prepared, pack bool) ([]*Result, error) {
	if len(slots) != len(ins) || len(ins) == 0 {
		return nil, fmt.Errorf("pi05 expert: %d slots for %d requests", len(slots), len(ins))
	}
	h, ad := d.policy.Server.ActionHorizon, d.policy.Dims.ActionDim
	out := make([]*Result, len(ins))
	var steps []int
	for _, in := range ins {
		if !slices.Contains(steps, in.Steps) {
			steps = append(steps, in.Steps)
		}
	}
	for _, st := range steps {
		var group []int
		var slabs []Slab
		var noise []float32
		var guides []*Guide // nil unless a request of the group has real-time chunking
		for i, in := range ins {
			if in.Steps != st {
				continue
			}
			s, err := d.slot(slots[i])
			if err != nil {
				return nil, err
			}
			group, slabs, noise = append(group, i), append(slabs, s), append(noise, in.Noise...)
			if in.Guide != nil && guides == nil {
				guides = make([]*Guide, len(group)-1, len(ins))
			}
			if guides != nil {
				guides = append(guides, in.Guide)
			}
		}
		t0 := time.Now()
		flat, err := d.prog.ExpertBatch(slabs, noise, h, st, pack, guides)
		if err != nil {
			return nil, err
		}
		took := time.Since(t0)
		for k, i := range group {
			r := d.policy.result(flat[k*h*ad : (k+1)*h*ad])
			r.Timing.Expert, r.BatchedAs = took, len(group)
			out[i] = r
		}
	}
	return out, nil
}

// Adopt copies the prefix in src's slot srcSlot into this device's slot dst (a prefix device
// handing a request to the expert device). src must not write that slot meanwhile.
func (d *Device) Adopt(dst int, src *Device, srcSlot int) error {
	to, err := d.slot(dst)
	if err != nil {
		return err
	}
	from, err := src.slot(srcSlot)
	if err != nil {
		return err
	}
	return d.prog.CopySlab(to, from)
}

// result slices one request's flat [horizon][ActionDim] expert output to the real action width
// and un-normalizes it when the checkpoint has action statistics.
func (p *Policy) result(flat []float32) *Result {
	h, ad, outDim := p.Server.ActionHorizon, p.Dims.ActionDim, p.Config.ActionDim()
	actions := make([][]float32, h)
	for r := range actions {
		actions[r] = flat[r*ad : r*ad+outDim : r*ad+outDim]
	}
	normalized := !p.Norm.UnnormalizeActions(actions)
	return &Result{Actions: actions, Normalized: normalized}
}
