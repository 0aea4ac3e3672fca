// Package rfdetrnative compiles a checked RF-DETR checkpoint into the
// native CPU program (package native, the cgo megakernel). It is kept apart
// from models/rfdetr so that package builds and tests without cgo.
package rfdetrnative

import (
	"context"
	"errors"
	"fmt"

	"github.com/ttmodel/tt-model/models/rfdetr"
	"github.com/ttmodel/tt-model/native"
)

// Builder returns an rfdetr.Builder that packs the weights into a native
// program with opts (precision, threads). Tensors are handed over one at a
// time, straight from the checkpoint mapping; the program copies them.
func Builder(opts native.RFDETROptions) rfdetr.Builder {
	return func(_ context.Context, w *rfdetr.Weights) (rfdetr.Network, error) {
		var readErrs []error
		prev := ""
		release := func() {
			if prev != "" {
				if err := w.Release(prev); err != nil {
					readErrs = append(readErrs, err)
				}
			}
		}
		prog, err := native.LoadRFDETRFunc(func(name string) (native.Tensor, bool) {
			// The program has packed the previous tensor by now: drop its
			// file pages so peak RSS stays near the packed weights.
			release()
			prev = name
			data, shape, err := w.Tensor(name)
			if err != nil {
				readErrs = append(readErrs, err)
				return native.Tensor{}, false
			}
			return native.Tensor{Shape: shape, Data: data}, true
		}, opts)
		release()
		if err != nil {
			return nil, errors.Join(append([]error{err}, readErrs...)...)
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
