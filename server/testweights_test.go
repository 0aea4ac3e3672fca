package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/models/rfdetr"
	"github.com/ttmodel/tt-model/models/safetensors"
)

// bodyOf is get's body alone.
func bodyOf(t *testing.T, url string) string {
	t.Helper()
	_, b := get(t, url)
	return b
}

// checkTestWeightsNotice: /health carries the notice as "weights", /info as weights.notice, and
// the console shows it as a banner; want "" checks that none of them says anything.
func checkTestWeightsNotice(t *testing.T, base, want string) {
	t.Helper()
	var health struct {
		Weights string `json:"weights"`
	}
	if err := json.Unmarshal([]byte(bodyOf(t, base+"/health")), &health); err != nil || health.Weights != want {
		t.Errorf("/health weights = %q (%v), want %q", health.Weights, err, want)
	}
	var info struct {
		Weights struct {
			Notice string `json:"notice"`
			Test   bool   `json:"test_weights"`
		} `json:"weights"`
	}
	if err := json.Unmarshal([]byte(bodyOf(t, base+"/info")), &info); err != nil || info.Weights.Notice != want || info.Weights.Test != (want != "") {
		t.Errorf("/info weights = %+v (%v), want notice %q", info.Weights, err, want)
	}
	page := bodyOf(t, base+"/")
	if banner := strings.Contains(page, `id="weights-warning"`); banner != (want != "") || !strings.Contains(page, want) {
		t.Errorf("console banner shown %v, want %v with %q", banner, want != "", want)
	}
}

// TestRFDETRSaysItRunsTestWeights: an RF-DETR server loaded from a random checkpoint of tt-model
// (marked) says so on /health, /info and the console.
func TestRFDETRSaysItRunsTestWeights(t *testing.T) {
	dir := t.TempDir()
	if err := (rfdetr.RandomCheckpoint{Seed: 1, DType: safetensors.BF16}).Write(dir); err != nil {
		t.Fatal(err)
	}
	m := NewRFDETR(RFDETROptions{Getenv: func(k string) string { return map[string]string{"TT_RF_DETR_WEIGHTS": dir}[k] },
		Device: "cpu test", Version: "test",
		Build: func(context.Context, *rfdetr.Weights, *slog.Logger) (rfdetr.Network, error) {
			return twoLabelOutputs(), nil
		}})
	if err := m.Load(context.Background(), discardLog()); err != nil {
		t.Fatal(err)
	}
	s := New(m, Options{Log: discardLog()})
	s.ready.Store(true)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	checkTestWeightsNotice(t, ts.URL, "random test weights, not Roboflow/rf-detr-base (tt-model random RF-DETR-base, seed 1): the outputs are meaningless")
}

// TestPI05SaysItRunsTestWeightsAndItsPin: a pi0.5 server on a snapshot folder of the HF cache shows
// the snapshot's commit as its revision (TT_WEIGHTS_REVISION unset), not "revision not pinned";
// on the tiny checkpoint marked as test weights it says so everywhere, unmarked it says nothing.
func TestPI05SaysItRunsTestWeightsAndItsPin(t *testing.T) {
	const commit = "b211f3d44c36b6acfcf7ae94a64e8e96f75a64ba"
	for _, marked := range []bool{true, false} {
		src := t.TempDir()
		for _, f := range []string{"model.safetensors", "config.json"} {
			b, err := os.ReadFile(filepath.Join("..", "kernels", "pi05", "testdata", "tiny", f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(src, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if marked {
			if err := hub.WriteTestWeightsMarker(src, "the tiny checkpoint"); err != nil {
				t.Fatal(err)
			}
		}
		snap, err := hub.Cache{Dir: t.TempDir()}.Import(hub.PI05Repo, commit, src)
		if err != nil {
			t.Fatal(err)
		}
		ts, _ := startPI05(t, map[string]string{"PI05_WEIGHTS_DIR": "", "HF_MODEL": snap.Dir})
		want := ""
		if marked {
			want = "random test weights, not lerobot/pi05_base (the tiny checkpoint): the outputs are meaningless"
		}
		checkTestWeightsNotice(t, ts.URL, want)
		var info struct {
			Weights struct {
				Revision string `json:"revision"`
			} `json:"weights"`
		}
		if err := json.Unmarshal([]byte(bodyOf(t, ts.URL+"/info")), &info); err != nil || info.Weights.Revision != commit {
			t.Errorf("/info weights.revision = %q (%v), want the snapshot's %s", info.Weights.Revision, err, commit)
		}
		if page := bodyOf(t, ts.URL+"/"); !strings.Contains(page, "lerobot/pi05_base @ "+commit) || strings.Contains(page, "not pinned") {
			t.Errorf("the console does not show the pin %s", commit)
		}
	}
}
