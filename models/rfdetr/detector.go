package rfdetr

import (
	"context"
	"fmt"
	"image"
	"log/slog"
	"path/filepath"
	"time"
)

// Network is the compiled forward: pixels (CHW 3×560×560, pre-processed)
// in, class logits [300][91] and boxes [300][4] (normalised cxcywh) out,
// written into the caller's slices. Implementations need not be safe for
// concurrent use.
type Network interface {
	Forward(ctx context.Context, pixels, logits, boxes []float32) error
	Close() error
}

// Builder compiles a Network from checked weights. The weights stay mapped
// until the Builder returns, then are closed: a Network must copy (pack)
// what it keeps.
type Builder func(ctx context.Context, w *Weights) (Network, error)

// Detector is a loaded RF-DETR: weights compiled into a Network plus the
// label table and reusable buffers. Not safe for concurrent use; servers
// serialise requests.
type Detector struct {
	net    Network
	labels [NumClasses]string
	source Source
	scheme string
	pixels []float32
	logits []float32
	boxes  []float32
}

// Load reads config.json and model.safetensors from src.Dir, checks every
// tensor, and builds the network.
func Load(ctx context.Context, src Source, build Builder, log *slog.Logger) (*Detector, error) {
	cfg, err := LoadConfig(filepath.Join(src.Dir, ConfigFile))
	if err != nil {
		return nil, err
	}
	if !cfg.Present {
		log.Warn("no config.json beside the weights; using the built-in COCO-91 labels", "dir", src.Dir)
	}
	start := time.Now()
	w, err := OpenWeights(filepath.Join(src.Dir, WeightsFile))
	if err != nil {
		return nil, err
	}
	log.Info("checkpoint checked", "path", w.Path(), "names", w.Scheme(), "tensors", len(w.Specs()))
	net, err := build(ctx, w)
	if cerr := w.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		if net != nil {
			_ = net.Close()
		}
		return nil, fmt.Errorf("build RF-DETR network from %s: %w", w.Path(), err)
	}
	log.Info("network built", "seconds", time.Since(start).Seconds())
	return NewDetector(net, cfg, src, w.Scheme()), nil
}

// NewDetector wraps an already built network.
func NewDetector(net Network, cfg Config, src Source, scheme string) *Detector {
	return &Detector{
		net:    net,
		labels: Labels(cfg.ID2Label),
		source: src,
		scheme: scheme,
		pixels: make([]float32, PixelCount),
		logits: make([]float32, NumQueries*NumClasses),
		boxes:  make([]float32, NumQueries*4),
	}
}

// Source is where the weights came from.
func (d *Detector) Source() Source { return d.source }

// Scheme is the checkpoint's naming scheme.
func (d *Detector) Scheme() string { return d.scheme }

// Labels is the class-id → name table in use.
func (d *Detector) Labels() [NumClasses]string { return d.labels }

// Options are the per-request knobs.
type Options struct {
	Threshold     float32
	MaxDetections int
}

// Timing splits a detection's wall time.
type Timing struct {
	Preprocess, Inference, Postprocess time.Duration
}

// Result is one image's detections. Logits and Boxes are the raw network
// outputs; they alias the Detector's buffers and are overwritten by the
// next call.
type Result struct {
	Detections []Detection
	Logits     []float32 // [300*91]
	Boxes      []float32 // [300*4], normalised cxcywh
	Timing     Timing
}

// InferenceError wraps a failure of the network itself (not of the input).
type InferenceError struct{ Err error }

func (e *InferenceError) Error() string { return "inference failed: " + e.Err.Error() }
func (e *InferenceError) Unwrap() error { return e.Err }

// Detect runs pre-processing, the forward and post-processing on img.
func (d *Detector) Detect(ctx context.Context, img image.Image, opt Options) (Result, error) {
	var r Result
	t0 := time.Now()
	if err := Preprocess(img, d.pixels); err != nil {
		return r, err
	}
	t1 := time.Now()
	if err := d.net.Forward(ctx, d.pixels, d.logits, d.boxes); err != nil {
		return r, &InferenceError{Err: err}
	}
	t2 := time.Now()
	b := img.Bounds()
	dets, err := Postprocess(d.logits, d.boxes, b.Dx(), b.Dy(), opt.Threshold, opt.MaxDetections, &d.labels)
	if err != nil {
		return r, &InferenceError{Err: err}
	}
	t3 := time.Now()
	r.Detections, r.Logits, r.Boxes = dets, d.logits, d.boxes
	r.Timing = Timing{Preprocess: t1.Sub(t0), Inference: t2.Sub(t1), Postprocess: t3.Sub(t2)}
	return r, nil
}

// Warmup runs n forwards on a mid-grey 560×560 image so the first request
// pays no first-touch costs.
func (d *Detector) Warmup(ctx context.Context, n int) error {
	img := image.NewGray(image.Rect(0, 0, InputSize, InputSize))
	for i := range img.Pix {
		img.Pix[i] = 128
	}
	for i := 0; i < n; i++ {
		if _, err := d.Detect(ctx, img, Options{Threshold: 1, MaxDetections: 1}); err != nil {
			return fmt.Errorf("warm-up forward %d of %d: %w", i+1, n, err)
		}
	}
	return nil
}

// Close releases the network.
func (d *Detector) Close() error { return d.net.Close() }
