package native

import (
	"bytes"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Packed weights: the arena a model packs into is the same bytes whatever order (or concurrency)
// the tensors arrive in, and a model attached to a copy of those bytes (as from a mapped cache
// file) computes bit for bit what the packing model computes.

// pageCopy copies b into fresh page-aligned memory, as a mapped file would be; release unmaps it.
func pageCopy(t *testing.T, b []byte) ([]byte, func() error) {
	t.Helper()
	m, err := unix.Mmap(-1, 0, len(b), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	copy(m, b)
	return m, func() error { return unix.Munmap(m) }
}

func TestPi05PackedWeightsAreOneBlock(t *testing.T) {
	g := pi05Goldens(t)[0]
	for _, prec := range []Precision{BF16, FP32, Ref} {
		t.Run(string(prec), func(t *testing.T) {
			seq := loadTiny(t, prec, ISABest)
			par := loadTinyFrom(t, prec, ISABest, true, 4)
			if !bytes.Equal(seq.Packed(), par.Packed()) || seq.LayoutID() != par.LayoutID() {
				t.Fatalf("packing in reverse order on 4 goroutines gives other bytes (layout %x vs %x)", par.LayoutID(), seq.LayoutID())
			}
			if int64(len(seq.Packed())) != seq.Bytes() {
				t.Errorf("packed block of %d bytes, Bytes() says %d", len(seq.Packed()), seq.Bytes())
			}
			mem, release := pageCopy(t, seq.Packed())
			mapped, err := NewPi05ModelPacked(seq.Dims(), prec, ISABest, mem, seq.LayoutID(), release)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = mapped.Close() })
			if err := mapped.Ready(); err != nil {
				t.Fatalf("a model over packed weights is ready at once: %v", err)
			}
			slabA, actA := runGolden(t, seq, g)
			slabB, actB := runGolden(t, mapped, g)
			if !slices.Equal(actA, actB) {
				t.Fatalf("actions from the attached weights differ from the packing model's (max |diff| %g)", maxAbsDiff(actA, actB))
			}
			for l := 0; l < seq.Dims().LLayers; l++ {
				ka, va, _ := slabA.KV(l)
				kb, vb, _ := slabB.KV(l)
				if !slices.Equal(ka, kb) || !slices.Equal(va, vb) {
					t.Fatalf("layer %d K/V differ between the packed and the attached weights", l)
				}
			}
			if _, err := mapped.SetTensor("action_in_proj.bias", DTypeF32, []int{seq.Dims().EWidth}, make([]byte, 4*seq.Dims().EWidth)); err == nil || !strings.Contains(err.Error(), "packed weights") {
				t.Errorf("SetTensor on attached weights: %v, want a refusal naming the packed weights", err)
			}
		})
	}
}

func TestPi05PackedWeightsRefuseAnotherLayout(t *testing.T) {
	m := loadTiny(t, BF16, ISABest)
	mem, release := pageCopy(t, m.Packed())
	t.Cleanup(func() { _ = release() })
	if _, err := NewPi05ModelPacked(m.Dims(), BF16, ISABest, mem, m.LayoutID()+1, nil); err == nil || !strings.Contains(err.Error(), "layout") {
		t.Errorf("another layout id: %v, want a layout error", err)
	}
	if _, err := NewPi05ModelPacked(m.Dims(), FP32, ISABest, mem, m.LayoutID(), nil); err == nil {
		t.Error("bf16 packed weights taken for an fp32 model")
	}
	if _, err := NewPi05ModelPacked(m.Dims(), BF16, ISABest, mem[:len(mem)-4096], m.LayoutID(), nil); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("a short block: %v, want a size error", err)
	}
	d := m.Dims()
	d.LMLP *= 2
	if _, err := NewPi05ModelPacked(d, BF16, ISABest, mem, m.LayoutID(), nil); err == nil {
		t.Error("packed weights taken for other dims")
	}
}

// residentChildEnv marks the re-executed test binary of TestRFDETRAttachedWeightsGrowByTheirScratch.
const residentChildEnv = "TT_NATIVE_RESIDENT_CHILD"

// An attached program grows the process by its scratch only, never by a copy of the packed block.
// Measured in a fresh process per precision (this test binary re-executed, running one subtest of
// TestRFDETRPackedWeightsAreOneBlock): in a process where earlier programs were freed, the C
// allocator hands their still-resident chunks to the next program, whose scratch then grows nothing.
func TestRFDETRAttachedWeightsGrowByTheirScratch(t *testing.T) {
	for _, prec := range []Precision{FP32, BF16} {
		sub := "TestRFDETRPackedWeightsAreOneBlock/" + string(prec)
		cmd := exec.Command(os.Args[0], "-test.run=^"+strings.Replace(sub, "/", "$/^", 1)+"$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), residentChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: "+sub) {
			t.Errorf("%s in a process of its own: %v\n%s", sub, err, out)
		}
	}
}

func TestRFDETRPackedWeightsAreOneBlock(t *testing.T) {
	for _, prec := range []Precision{FP32, BF16} {
		t.Run(string(prec), func(t *testing.T) {
			opts := RFDETROptions{Precision: prec, Threads: 2}
			a, pixels := loadRandomRFDETR(t, 1, opts)
			b, _ := loadRandomRFDETR(t, 1, opts)
			if !bytes.Equal(a.Packed(), b.Packed()) {
				t.Fatal("two loads of one checkpoint pack different bytes")
			}
			want, err := a.Forward(pixels)
			if err != nil {
				t.Fatal(err)
			}
			mem, release := pageCopy(t, a.Packed())
			// The Go heap's garbage (the random checkpoint) is returned to the system now, not by the
			// background scavenger while the program below grows: that would hide the growth.
			debug.FreeOSMemory()
			rss := residentBytes(t)
			mapped, err := NewRFDETRPacked(opts, mem, a.LayoutID(), release)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = mapped.Close() })
			if err := mapped.Ready(); err != nil {
				t.Fatal(err)
			}
			got, err := mapped.Forward(pixels)
			if err != nil {
				t.Fatal(err)
			}
			if *got != *want {
				t.Fatal("the forward over attached weights differs from the packing program's")
			}
			// Bytes counts the packed block and the scratch, which the program's first forward has
			// all written: the process grew by the scratch (the block was already resident). The
			// growth is only checked in a process of its own (TestRFDETRAttachedWeightsGrowByTheirScratch).
			packed, scratch := int64(len(a.Packed())), mapped.Bytes()-int64(len(a.Packed()))
			grown := residentBytes(t) - rss
			t.Logf("Bytes %d: packed %d, scratch %d; resident memory grew by %d", mapped.Bytes(), packed, scratch, grown)
			if a.Bytes() != mapped.Bytes() || scratch <= 0 {
				t.Errorf("Bytes %d (packing program %d) = packed %d + scratch %d", mapped.Bytes(), a.Bytes(), packed, scratch)
			}
			if os.Getenv(residentChildEnv) == "1" && (grown < scratch*8/10 || grown > scratch*11/10+4<<20) {
				t.Errorf("packed %d + scratch %d; the process grew by %d", packed, scratch, grown)
			}
			if _, err := mapped.SetTensor("query_feat.weight", DTypeF32, []int{3900, 256}, make([]byte, 4*3900*256)); err == nil {
				t.Error("SetTensor on attached weights accepted")
			}
			if _, err := NewRFDETRPacked(opts, mem, a.LayoutID()^1, nil); err == nil || !strings.Contains(err.Error(), "layout") {
				t.Errorf("another layout id: %v, want a layout error", err)
			}
		})
	}
}

// residentBytes is this process's resident memory (VmRSS).
func residentBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
