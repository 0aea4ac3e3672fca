package pi05

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Device is one Program of a policy's weights with its slabs: the unit that serves requests (the
// CPU stand-in for one chip). Its methods are not for concurrent use.
type Device struct {
	policy *Policy
	prog   Program
	slabs  []Slab
}

// NewDevice compiles the policy's preset, with room for batches of maxBatch requests, on a pool of
// threads (<= 0: TT_NUM_THREADS or every CPU), and allocates one slab per batch slot.
func (p *Policy) NewDevice(threads, maxBatch int) (*Device, error) {
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
	for range preset.MaxBatch {
		s, err := prog.NewSlab()
		if err != nil {
			d.Close()
			return nil, err
		}
		d.slabs = append(d.slabs, s)
	}
	return d, nil
}

// Threads is the size of the device's thread pool.
func (d *Device) Threads() int { return d.prog.Threads() }

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
}

// Run executes VISION, PREFIX and EXPERT for one prepared request.
func (d *Device) Run(ctx context.Context, in *Prepared) (*Result, error) {
	if d.prog == nil {
		return nil, fmt.Errorf("pi05: device is closed")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var t Timing
	s := d.slabs[0]
	hit, err := d.policy.prefix(d.prog, s, in, &t)
	if err != nil {
		return nil, err
	}
	t2 := time.Now()
	h := d.policy.Server.ActionHorizon
	flat, err := d.prog.ExpertBatch([]Slab{s}, in.Noise, h, in.Steps, true, []*Guide{in.Guide})
	if err != nil {
		return nil, err
	}
	t.Expert = time.Since(t2)
	res := d.policy.result(flat)
	res.Timing, res.PrefixCacheHit = t, hit
	return res, nil
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
