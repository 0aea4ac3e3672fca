package pi05

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
)

// The tiny random checkpoint of the kernel tests and a SentencePiece model with fewer pieces than
// its vocabulary. Pre-processing needs no weights: these policies are loaded without a Builder
// (package pi05native tests the compute).
var (
	tinyDir       = filepath.Join("..", "..", "kernels", "pi05", "testdata", "tiny")
	tinyTokenizer = filepath.Join("spm", "testdata", "bpe_tiny.model")
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func loadTiny(t *testing.T, cams, horizon int) *Policy {
	t.Helper()
	srv, err := ServerConfigFromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	srv.NumImages, srv.ActionHorizon, srv.Tokenizer = cams, horizon, tinyTokenizer
	p, err := LoadPolicy(context.Background(), srv, tinyDir, nil, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestPolicyWithoutWeightsHasNoDevice(t *testing.T) {
	p := loadTiny(t, 2, 10)
	if _, err := p.NewDevice(1, 1, 1); err == nil {
		t.Fatal("NewDevice on a policy loaded without a Builder: want an error")
	}
	if p.Preset != (Preset{Cams: 2, TextBucket: 224, ActionRows: 32, MaxBatch: 1}) {
		t.Errorf("preset %+v", p.Preset)
	}
}
