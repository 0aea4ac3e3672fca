package pi05native_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/models/pi05"
	"github.com/ttmodel/tt-model/models/pi05/golden"
	"github.com/ttmodel/tt-model/models/pi05/pi05native"
	"github.com/ttmodel/tt-model/native"
)

// build runs b on the tiny checkpoint and returns the kernels and what they log (loading now,
// programs later).
func build(t *testing.T, b pi05.Builder) (pi05.Kernels, *bytes.Buffer) {
	t.Helper()
	dir := filepath.Join(root, golden.TinyDir)
	cfg, err := pi05.LoadPolicyConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := pi05.OpenCheckpoint(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	logs := &bytes.Buffer{}
	k, err := b(context.Background(), ck, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k, logs
}

// firstGolden is the first golden request.
func firstGolden(t *testing.T) golden.Case {
	t.Helper()
	cases, err := golden.All(filepath.Join(root, golden.Dir))
	if err != nil {
		t.Fatal(err)
	}
	return cases[0]
}

// runCase runs one golden request through a program of k: its actions and every layer's K/V.
func runCase(t *testing.T, k pi05.Kernels, g golden.Case) []float32 {
	t.Helper()
	prog, err := k.NewProgram(pi05.Preset{Cams: g.Cams(), TextBucket: len(g.Tokens), ActionRows: pi05.ActionRows(g.Horizon), MaxBatch: 1}, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	s, err := prog.NewSlab()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := prog.Vision(s, g.Images, g.CamMask); err != nil {
		t.Fatal(err)
	}
	if err := prog.Prefix(s, g.Tokens, g.TokMask); err != nil {
		t.Fatal(err)
	}
	act, err := prog.ExpertBatch([]pi05.Slab{s}, g.Noise, g.Horizon, g.Steps, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	return act
}

// The packed-weights cache: the first start packs and keeps the packed bytes, the next maps them;
// the mapped weights are byte for byte the packed ones and compute bit for bit the same actions;
// a damaged file is removed and packed again.
func TestPackedWeightsCache(t *testing.T) {
	g := firstGolden(t)
	for _, prec := range []native.Precision{native.BF16, native.FP32} {
		t.Run(string(prec), func(t *testing.T) {
			dir := t.TempDir()
			b := pi05native.Builder(pi05native.Options{Precision: prec, CacheDir: dir})
			packed, logs := build(t, b)
			if !strings.Contains(logs.String(), "no packed weights for this checkpoint yet") {
				t.Errorf("first start: %s", logs)
			}
			if err := pi05native.WaitStored(packed); err != nil {
				t.Fatal(err)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "pi05-"+string(prec)+"-*.ttpack"))
			if len(files) != 1 {
				t.Fatalf("cache holds %v", files)
			}
			mapped, logs := build(t, b)
			if !strings.Contains(logs.String(), "pi05 packed weights mapped") {
				t.Fatalf("second start did not map the packed weights: %s", logs)
			}
			pm, _ := pi05native.Model(packed)
			mm, _ := pi05native.Model(mapped)
			if !bytes.Equal(pm.Packed(), mm.Packed()) {
				t.Fatal("the mapped weights differ from the packed ones")
			}
			if a, b := runCase(t, packed, g), runCase(t, mapped, g); !slices.Equal(a, b) {
				t.Fatal("actions from the mapped weights differ from the packed weights'")
			}

			// a flipped byte in the payload: removed, packed again, kept again
			f, err := os.OpenFile(files[0], os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			st, _ := f.Stat()
			if _, err := f.WriteAt([]byte{0xff, 0xee}, st.Size()-100); err != nil {
				t.Fatal(err)
			}
			f.Close()
			again, logs := build(t, b)
			if l := logs.String(); !strings.Contains(l, "CRC-32C") || !strings.Contains(l, "pi05 packed from the checkpoint") {
				t.Fatalf("a damaged file was not rebuilt: %s", logs)
			}
			if err := pi05native.WaitStored(again); err != nil {
				t.Fatal(err)
			}
			_, logs = build(t, b)
			if !strings.Contains(logs.String(), "pi05 packed weights mapped") {
				t.Errorf("after the rebuild the cache is not used: %s", logs)
			}
		})
	}
}

// Tuned GEMM plans are kept per CPU and program shape: the first program tunes, the next reads
// the kept plan; both compute the same actions as the derived plan.
func TestGEMMTuningIsKept(t *testing.T) {
	g := firstGolden(t)
	dir := t.TempDir()
	plain, _ := build(t, pi05native.Builder(pi05native.Options{Precision: native.BF16}))
	want := runCase(t, plain, g)
	auto := pi05native.Builder(pi05native.Options{Precision: native.BF16, Tuning: native.GEMMTuning{Mode: "auto", Dir: dir}})
	tuned, logs := build(t, auto)
	if got := runCase(t, tuned, g); !slices.Equal(got, want) {
		t.Error("a tuned plan changed the actions")
	}
	if !strings.Contains(logs.String(), "gemm plan tuned") {
		t.Errorf("the first program did not tune: %s", logs)
	}
	b, err := os.ReadFile(filepath.Join(dir, native.PlansFile))
	if err != nil || !strings.Contains(string(b), "pi05 bf16") || !strings.Contains(string(b), "m<=128:") {
		t.Fatalf("kept plans: %s, %v", b, err)
	}
	again, logs := build(t, auto)
	if got := runCase(t, again, g); !slices.Equal(got, want) {
		t.Error("the kept plan changed the actions")
	}
	if l := logs.String(); !strings.Contains(l, "gemm plan from the tuned plans") || strings.Contains(l, "gemm plan tuned") {
		t.Errorf("the second program tuned again: %s", l)
	}
}

// The devices of one model and shape tune once: with TT_GEMM_TUNE=always and nowhere to keep plans,
// the second program of the same shape takes the first one's plan, and computes the same actions.
func TestProgramsOfOneShapeTuneOnce(t *testing.T) {
	g := firstGolden(t)
	k, logs := build(t, pi05native.Builder(pi05native.Options{Precision: native.BF16, Tuning: native.GEMMTuning{Mode: "always"}}))
	first := runCase(t, k, g)
	second := runCase(t, k, g)
	if !slices.Equal(first, second) {
		t.Error("the second program's actions differ")
	}
	if n := strings.Count(logs.String(), "gemm plan tuned"); n != 1 {
		t.Errorf("%d tunings for two programs of one shape, want 1:\n%s", n, logs)
	}
}

// A cache that cannot be used (here the file's name is taken by a folder) is reported and the
// weights are packed anyway: the server starts.
func TestUnusableCacheStillLoads(t *testing.T) {
	dir := t.TempDir()
	b := pi05native.Builder(pi05native.Options{Precision: native.BF16, CacheDir: dir})
	k, _ := build(t, b)
	if err := pi05native.WaitStored(k); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.ttpack"))
	if len(files) != 1 {
		t.Fatalf("cache holds %v", files)
	}
	if err := os.Remove(files[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(files[0], "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, logs := build(t, b)
	if l := logs.String(); !strings.Contains(l, "cache unusable") || !strings.Contains(l, "pi05 packed from the checkpoint") {
		t.Errorf("logs: %s", l)
	}
}
