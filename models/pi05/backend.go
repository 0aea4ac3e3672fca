package pi05

import (
	"context"
	"log/slog"

	"github.com/ttmodel/tt-model/models/pi05/arch"
)

// The compute behind a Policy, kept behind interfaces so this package builds and tests without
// cgo: package pi05native implements them with the C megakernels (package native), tests with
// fakes.

// Preset is one compiled configuration (one type with the kernels': arch.Preset).
type Preset = arch.Preset

// Builder packs a checked checkpoint into Kernels (Checkpoint.Each hands over the tensors and
// logs progress). The checkpoint stays open until the Builder returns; Kernels must copy (pack)
// what they keep.
type Builder func(ctx context.Context, ck *Checkpoint, log *slog.Logger) (Kernels, error)

// Kernels are the packed weights of one checkpoint, shared read-only by every Program made from
// them: N programs cost N scratch areas, not N copies of the weights.
type Kernels interface {
	// NewProgram specialises the weights for a preset with its own scratch and a pool of
	// threads (<= 0: TT_NUM_THREADS or every CPU).
	NewProgram(p Preset, threads int) (Program, error)
	// Describe names the kernel family, the precision and the packed size, for logs and /info.
	Describe() KernelInfo
	// Close frees the weights; every program must be closed first.
	Close() error
}

// KernelInfo describes loaded Kernels.
type KernelInfo struct {
	ISA         string // e.g. avx512bf16, or "reference"
	Precision   string // bf16, fp32 or ref
	PackedBytes int64
}

// Program runs the three stages of one preset; the CPU stand-in for one chip. Calls on a program
// are not concurrent (it has one scratch); programs run concurrently.
type Program interface {
	// NewSlab allocates one request's state (image tokens, prefix K/V), reusable.
	NewSlab() (Slab, error)
	// Vision: images [Cams][3][S][S] in [-1, 1], camMask[Cams].
	Vision(s Slab, images []float32, camMask []bool) error
	// Prefix: the Gemma prefix over the slab's image tokens and tokens[i] with mask[i].
	Prefix(s Slab, tokens []int32, mask []bool) error
	// ExpertBatch: len(slabs) requests, noise and the result [len(slabs)][horizon][ActionDim].
	// pack=true shares each linear's GEMM across the requests, pack=false runs them one by one;
	// either way each request is bit-identical to the same request alone. guides (nil,
	// or one per request, nil entries allowed) add real-time chunking to those requests; an
	// unguided request's result is what it would be without the argument, bit for bit.
	ExpertBatch(slabs []Slab, noise []float32, horizon, steps int, pack bool, guides []*Guide) ([]float32, error)
	// SavePrefix returns s's prefix (valid length and per-layer K/V) as a blob that LoadPrefix
	// puts into a slab of any program of the same Kernels: the prefix cache's entries.
	SavePrefix(s Slab) ([]byte, error)
	// LoadPrefix replaces s's state with a saved prefix; EXPERT on it gives what it gave on the
	// saved slab, bit for bit. A blob that does not fit s (another layout, more rows) is an error.
	LoadPrefix(s Slab, blob []byte) error
	// CopySlab copies src's image tokens and prefix K/V into dst, a slab of this program; src may
	// belong to another program of the same Kernels and preset (a prefix handed to an expert).
	CopySlab(dst, src Slab) error
	// Pin pins the program's pool thread i (1..Threads()-1) to cpus[i % len(cpus)]; thread 0 is
	// the caller's, which pins itself.
	Pin(cpus []int) error
	Threads() int
	ScratchBytes() int64
	Close() error
}

// Slab is one request's state in a Program.
type Slab interface {
	Bytes() int64
	Close() error
}
