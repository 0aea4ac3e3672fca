package kube

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/server/api"
)

// peakRSS is the measured peak resident memory of tt-model-server per model
// (runtime.model) with the full-size weights at the default precision:
// pi0.5 7.48 GB (bf16, 1.08x its packed weights, docs/PERFORMANCE.md), RF-DETR
// 197 MB (fp32, docs/rfdetr.md). The server computes on the CPU, so its
// memory is the packed weights plus the kernels' scratch, nothing on a chip.
var peakRSS = map[string]int64{
	api.KindPI05:   7_480_000_000,
	api.KindRFDETR: 197_000_000,
}

// memoryHeadroom is added to the peak: a quarter of it, at least 256 MiB,
// for request bodies and the Go heap between collections.
func memoryHeadroom(peak int64) int64 { return max(peak/4, 256<<20) }

// threadsEnv is how many threads tt-model-server's kernels run on.
const threadsEnv = "TT_NUM_THREADS"

// defaultRequests fills the CPU and memory the user did not give from the
// model's measured needs: memory the peak RSS plus headroom, rounded up to
// 64 MiB; CPU the threads the profile runs (TT_NUM_THREADS, else one per
// device of its hardware, which the server gives at least one thread each).
// A kind without figures keeps what was given and says so in the note.
func defaultRequests(w *manifest.Wire, p manifest.Profile, l manifest.Launch, o Options) (Options, string) {
	model, _ := w.Container.Runtime["model"].(string)
	peak, known := peakRSS[model]
	if w.Container.Kind != manifest.KindGoServer || !known {
		if o.CPU.IsZero() || o.Memory.IsZero() {
			return o, fmt.Sprintf("kind %s has no measured CPU and memory figures here: the pods request only what --cpu and --memory say", w.Container.Kind)
		}
		return o, ""
	}
	if o.Memory.IsZero() {
		const step = 64 << 20
		b := peak + memoryHeadroom(peak)
		o.Memory = *resource.NewQuantity((b+step-1)/step*step, resource.BinarySI)
	}
	if o.CPU.IsZero() {
		threads := int64(1)
		if n, err := strconv.ParseInt(l.Env[threadsEnv], 10, 32); err == nil && n > 0 {
			threads = n
		} else if h, err := manifest.ParseHardware(p.Hardware); err == nil {
			threads = int64(h.Chips())
		}
		o.CPU = *resource.NewQuantity(threads, resource.DecimalSI)
	}
	return o, ""
}
