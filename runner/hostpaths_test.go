package runner

import (
	"testing"

	"github.com/ttmodel/tt-model/hub"
)

// A profile's container paths name the same host files on the bare host.
func TestHostEnvMapsContainerPaths(t *testing.T) {
	spec := &Spec{StateDir: "/home/u/.cache/tt-model/pi05", HF: hub.Config{HFHome: "/home/u/.cache/huggingface"}}
	got := hostEnv(map[string]string{
		"PI05_HANG_MARKER": "/cache/pi05_hang_marker", "X": "/cache", "W": "/weight-cache/a", "HF": "/hf/hub",
		"KEEP": "/cachet/x", "N": "2",
	}, hostMounts(spec))
	want := map[string]string{
		"PI05_HANG_MARKER": "/home/u/.cache/tt-model/pi05/cache/pi05_hang_marker", "X": "/home/u/.cache/tt-model/pi05/cache",
		"W": "/home/u/.cache/tt-model/pi05/weights/a", "HF": "/home/u/.cache/huggingface/hub", "KEEP": "/cachet/x", "N": "2",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}
