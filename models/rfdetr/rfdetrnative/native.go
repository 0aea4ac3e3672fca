// Package rfdetrnative compiles a checked RF-DETR checkpoint into the
// native CPU program (package native, the cgo megakernel). It is kept apart
// from models/rfdetr so that package builds and tests without cgo.
package rfdetrnative

import (
	"context"
	"fmt"

	"github.com/ttmodel/tt-model/models/rfdetr"
	"github.com/ttmodel/tt-model/native"
)

// Builder returns an rfdetr.Builder that packs the weights into a native
// program with opts (precision, threads). Tensors are handed over by name, one
// at a time in the program's order, straight from the checkpoint mapping; the
// program copies them.
func Builder(opts native.RFDETROptions) rfdetr.Builder {
	return func(_ context.Context, w *rfdetr.Weights) (rfdetr.Network, error) {
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
				prog.Close()
				return nil, err
			}
		}
		if err := prog.Ready(); err != nil {
			prog.Close()
			return nil, err
		}
		return &Network{prog: prog}, nil
	}
}

// Network adapts a native program to rfdetr.Network.
type Network struct {
	prog *native.RFDETR
}

// Program exposes the native program (stages, timing) to tests and benchmarks.
func (n *Network) Program() *native.RFDETR { return n.prog }

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

// Close frees the program.
func (n *Network) Close() error {
	n.prog.Close()
	return nil
}
