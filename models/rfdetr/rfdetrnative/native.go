// Package rfdetrnative compiles a checked RF-DETR checkpoint into the
// native CPU program (package native, the cgo megakernel). It is kept apart
// from models/rfdetr so that package builds and tests without cgo.
package rfdetrnative

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ttmodel/tt-model/models/rfdetr"
	"github.com/ttmodel/tt-model/native"
	"github.com/ttmodel/tt-model/native/packcache"
)

// Options of the native network: the program's, where packed weights are kept, and how its GEMMs
// are blocked.
type Options struct {
	native.RFDETROptions
	// CacheDir keeps packed weights (native/packcache): when it holds this checkpoint's, they are
	// mapped instead of packed; otherwise the program packs the checkpoint and writes the result
	// there in the background. "" packs at every start.
	CacheDir string
	// Tuning gives the program its GEMM blocking plan (the zero value: the derived plan).
	Tuning native.GEMMTuning
}

// Builder returns an rfdetr.Builder that maps the checkpoint's packed weights from the cache, or
// packs the weights into a native program (tensors handed over by name, one at a time in the
// program's order, straight from the checkpoint mapping) and keeps the result in the cache.
func Builder(opts Options) rfdetr.Builder {
	if opts.Precision == "" {
		opts.Precision = native.FP32
	}
	if opts.Tuning.Mode == "" {
		opts.Tuning.Mode = "off"
	}
	return func(ctx context.Context, w *rfdetr.Weights, log *slog.Logger) (rfdetr.Network, error) {
		start := time.Now()
		n := &Network{}
		var key packcache.Key
		cacheDir := opts.CacheDir
		if cacheDir != "" {
			var err error
			if key, n.prog, err = fromCache(ctx, opts, w.Path(), log); err != nil {
				if ctx.Err() != nil {
					return nil, err
				}
				// a cache that cannot be read is not a reason to fail: pack, and keep nothing
				log.Warn("rf-detr packed weights cache unusable, packing without it", "dir", cacheDir, "err", err)
				cacheDir = ""
			}
			if n.prog != nil {
				log.Info("rf-detr packed weights mapped", "file", key.FileName(), "dir", opts.CacheDir,
					"seconds", time.Since(start).Seconds())
			}
		}
		if n.prog == nil {
			prog, err := pack(w, opts.RFDETROptions)
			if err != nil {
				return nil, err
			}
			n.prog = prog
			log.Info("rf-detr packed from the checkpoint", "seconds", time.Since(start).Seconds())
			if cacheDir != "" {
				n.stored = packcache.StoreInBackground(cacheDir, key, prog.Packed(), "rf-detr", log)
			}
		}
		shape := fmt.Sprintf("rfdetr %s %s threads=%d layout=%016x", n.prog.Precision(), native.DetectCPU().BestISA,
			n.prog.Threads(), n.prog.LayoutID())
		if _, err := opts.Tuning.Apply(n.prog, shape, log); err != nil {
			_ = n.Close()
			return nil, err
		}
		return n, nil
	}
}

// pack hands every weight to a new program.
func pack(w *rfdetr.Weights, opts native.RFDETROptions) (*native.RFDETR, error) {
	prog, err := native.NewRFDETR(opts)
	if err != nil {
		return nil, err
	}
	for _, s := range native.RFDETRWeights() {
		data, shape, err := w.Tensor(s.Name)
		if err == nil {
			_, err = prog.SetTensor(s.Name, native.DTypeF32, shape, native.F32Bytes(data))
		}
		if err == nil {
			// Packed by now: drop its file pages so peak RSS stays near the packed weights.
			err = w.Release(s.Name)
		}
		if err != nil {
			_ = prog.Close()
			return nil, err
		}
	}
	if err := prog.Ready(); err != nil {
		_ = prog.Close()
		return nil, err
	}
	return prog, nil
}

// fromCache maps the checkpoint's packed weights when the cache has them whole; else it returns the
// key to store them under, and a nil program.
func fromCache(ctx context.Context, opts Options, path string, log *slog.Logger) (packcache.Key, *native.RFDETR, error) {
	layout, err := native.RFDETRLayoutID(opts.RFDETROptions)
	if err != nil {
		return packcache.Key{}, nil, err
	}
	w := packcache.Wanted{Model: "rfdetr", What: "rf-detr", Checkpoint: path, Precision: string(opts.Precision), Layout: layout}
	return packcache.Open(ctx, opts.CacheDir, w, log, func(m *packcache.Mapped) (*native.RFDETR, error) {
		return native.NewRFDETRPacked(opts.RFDETROptions, m.Data, layout, m.Close)
	})
}

// Network adapts a native program to rfdetr.Network.
type Network struct {
	prog   *native.RFDETR
	stored *packcache.Pending // the packed weights being written to the cache, or nil
}

// WaitStored waits until the packed weights are in the cache and returns the store's error; nil at
// once when nothing was being stored. For tests and benchmarks.
func (n *Network) WaitStored() error { return n.stored.Wait() }

// Program exposes the native program (stages, timing) to tests and benchmarks.
func (n *Network) Program() *native.RFDETR { return n.prog }

// NativeBytes is the program's memory outside the Go heap: packed weights and scratch.
func (n *Network) NativeBytes() int64 { return n.prog.Bytes() }

// Forward runs the whole network in one cgo call and copies the outputs.
// The call cannot be interrupted: ctx is only checked before it starts.
func (n *Network) Forward(ctx context.Context, pixels, logits, boxes []float32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(logits) != rfdetr.NumQueries*rfdetr.NumClasses || len(boxes) != rfdetr.NumQueries*4 {
		return fmt.Errorf("rf-detr forward: output buffers hold %d logits and %d box values, want %d and %d",
			len(logits), len(boxes), rfdetr.NumQueries*rfdetr.NumClasses, rfdetr.NumQueries*4)
	}
	out, err := n.prog.Forward(pixels)
	if err != nil {
		return err
	}
	for q := range out.Logits {
		copy(logits[q*rfdetr.NumClasses:], out.Logits[q][:])
		copy(boxes[q*4:], out.Boxes[q][:])
	}
	return nil
}

// Close stops a store in progress and frees the program.
func (n *Network) Close() error {
	n.stored.Stop()
	return n.prog.Close()
}
