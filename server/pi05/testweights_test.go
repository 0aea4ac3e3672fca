package pi05

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/server/modeltest"
)

// TestPI05SaysItRunsTestWeightsAndItsPin: a pi0.5 server on a snapshot folder of the HF cache shows
// the snapshot's commit as its revision (TT_WEIGHTS_REVISION unset), not "revision not pinned";
// on the tiny checkpoint marked as test weights it says so everywhere, unmarked it says nothing.
func TestPI05SaysItRunsTestWeightsAndItsPin(t *testing.T) {
	const commit = "b211f3d44c36b6acfcf7ae94a64e8e96f75a64ba"
	for _, marked := range []bool{true, false} {
		src := t.TempDir()
		for _, f := range []string{"model.safetensors", "config.json"} {
			b, err := os.ReadFile(filepath.Join("..", "..", "kernels", "pi05", "testdata", "tiny", f))
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
		modeltest.CheckTestWeightsNotice(t, ts.URL, want)
		var info struct {
			Weights struct {
				Revision string `json:"revision"`
			} `json:"weights"`
		}
		if err := json.Unmarshal([]byte(servertest.Body(t, ts.URL+"/info")), &info); err != nil || info.Weights.Revision != commit {
			t.Errorf("/info weights.revision = %q (%v), want the snapshot's %s", info.Weights.Revision, err, commit)
		}
		if page := servertest.Body(t, ts.URL+"/"); !strings.Contains(page, "lerobot/pi05_base @ "+commit) || strings.Contains(page, "not pinned") {
			t.Errorf("the console does not show the pin %s", commit)
		}
	}
}
