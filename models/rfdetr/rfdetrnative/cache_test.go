package rfdetrnative

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/internal/testing/testenv"
	"github.com/ttmodel/tt-model/models/rfdetr"
	"github.com/ttmodel/tt-model/native"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// buildFrom builds the network of the checkpoint in dir with b, returning what it logged.
func buildFrom(t *testing.T, dir string, b rfdetr.Builder) (*Network, string) {
	t.Helper()
	w, err := rfdetr.OpenWeights(filepath.Join(dir, rfdetr.WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	net, err := b(context.Background(), w, slog.New(slog.NewTextHandler(&logs, nil)))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = net.Close() })
	return net.(*Network), logs.String()
}

// The packed-weights cache through the real loader: the first build packs and keeps the packed
// bytes, the next maps them; the mapped program's packed bytes and forward are bit for bit the
// packing program's, in both precisions; tuning with a kept plan changes nothing either.
func TestPackedWeightsCache(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "full-size checkpoint: skipped with -short")
	}
	ckpt := t.TempDir()
	if err := (rfdetr.RandomCheckpoint{Seed: 5}).Write(ckpt); err != nil {
		t.Fatal(err)
	}
	spec, err := native.ReadRandomCheckpointSpec(checkpointSpec)
	if err != nil {
		t.Fatal(err)
	}
	pixels := native.RandomTensor(spec.Pixels, 1).Data
	for _, prec := range []native.Precision{native.FP32, native.BF16} {
		t.Run(string(prec), func(t *testing.T) {
			cache := t.TempDir()
			b := Builder(Options{RFDETROptions: native.RFDETROptions{Precision: prec, Threads: 2}, CacheDir: cache,
				Tuning: native.GEMMTuning{Mode: "auto", Dir: cache}})
			packed, logs := buildFrom(t, ckpt, b)
			if !strings.Contains(logs, "rf-detr packed from the checkpoint") || !strings.Contains(logs, "gemm plan tuned") {
				t.Fatalf("first build: %s", logs)
			}
			if err := packed.WaitStored(); err != nil {
				t.Fatal(err)
			}
			mapped, logs := buildFrom(t, ckpt, b)
			if !strings.Contains(logs, "rf-detr packed weights mapped") || !strings.Contains(logs, "gemm plan from the tuned plans") {
				t.Fatalf("second build: %s", logs)
			}
			if !bytes.Equal(packed.Program().Packed(), mapped.Program().Packed()) {
				t.Fatal("the mapped weights differ from the packed ones")
			}
			want, err := packed.Program().Forward(pixels)
			if err != nil {
				t.Fatal(err)
			}
			got, err := mapped.Program().Forward(pixels)
			if err != nil {
				t.Fatal(err)
			}
			if *got != *want {
				t.Fatal("the forward over the mapped weights differs from the packing program's")
			}
		})
	}
}
