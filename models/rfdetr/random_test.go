package rfdetr

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/models/safetensors"
)

// TestRandomCheckpointIsMarked: a random checkpoint carries the test-weights marker, so every copy
// of it (imported, pulled from a local Hub) is named as random test weights.
func TestRandomCheckpointIsMarked(t *testing.T) {
	dir := t.TempDir()
	if err := (RandomCheckpoint{Seed: 4, DType: safetensors.BF16}).Write(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, hub.TestWeightsFile)); err != nil {
		t.Errorf("no marker: %v", err)
	}
	if what, ok := hub.TestWeightsIn(dir); !ok || !strings.HasPrefix(what, "tt-model random RF-DETR-base, seed 4") {
		t.Errorf("TestWeightsIn = %q, %v", what, ok)
	}
}
