package rfdetr

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/models/rfdetr"
	"github.com/ttmodel/tt-model/models/safetensors"
	"github.com/ttmodel/tt-model/server"
	"github.com/ttmodel/tt-model/server/modeltest"
)

// TestRFDETRSaysItRunsTestWeights: an RF-DETR server loaded from a random checkpoint of tt-model
// (marked) says so on /health, /info and the console.
func TestRFDETRSaysItRunsTestWeights(t *testing.T) {
	dir := t.TempDir()
	if err := (rfdetr.RandomCheckpoint{Seed: 1, DType: safetensors.BF16}).Write(dir); err != nil {
		t.Fatal(err)
	}
	m := New(Options{Getenv: func(k string) string { return map[string]string{"TT_RF_DETR_WEIGHTS": dir}[k] },
		Device: "cpu test", Version: "test",
		Build: func(context.Context, *rfdetr.Weights, *slog.Logger) (rfdetr.Network, error) {
			return twoLabelOutputs(), nil
		}})
	if err := m.Load(context.Background(), servertest.DiscardLog()); err != nil {
		t.Fatal(err)
	}
	s := server.New(m, server.Options{Log: servertest.DiscardLog()})
	s.MarkLoaded()
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	modeltest.CheckTestWeightsNotice(t, ts.URL, "random test weights, not Roboflow/rf-detr-base (tt-model random RF-DETR-base, seed 1): the outputs are meaningless")
}
