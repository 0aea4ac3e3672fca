package builder

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocateBinaries covers the order: runtime.server, the tt-model-server
// beside the running tt-model, else a build from this module, which is
// reproducible (-trimpath, empty build id).
func TestLocateBinaries(t *testing.T) {
	bin := fixtureBin(t)
	ctx := context.Background()
	server := filepath.Join(bin, "tt-model-server")

	s, tool, err := locateBinaries(ctx, binaryPlan{Executable: filepath.Join(bin, "tt-model"), Log: testLog{}})
	if err != nil || s.HostPath != server || s.From != "installed beside tt-model" || tool.From != "the running tt-model" {
		t.Errorf("beside: %+v %+v %v", s, tool, err)
	}

	// Not named tt-model (a test binary): the tool is built from the module.
	var sums []string
	for i := 0; i < 2; i++ {
		s, tool, err = locateBinaries(ctx, binaryPlan{
			ServerPath: server, Executable: filepath.Join(bin, "builder.test"),
			SearchDirs: []string{"."}, BuildDir: t.TempDir(), Log: testLog{},
		})
		if err != nil {
			t.Fatalf("build tt-model from the module: %v", err)
		}
		if s.From != "runtime.server" || tool.From != fromSource {
			t.Errorf("from: server %q tool %q", s.From, tool.From)
		}
		sum, _, err := fileSHA256(tool.HostPath)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, sum)
	}
	if sums[0] != sums[1] {
		t.Errorf("two builds of ./cmd/tt-model differ: %s %s", sums[0], sums[1])
	}

	_, _, err = locateBinaries(ctx, binaryPlan{ServerPath: server, SearchDirs: []string{t.TempDir()}, Log: testLog{}})
	if err == nil || !strings.Contains(err.Error(), "no tt-model binary to put in the image") {
		t.Errorf("no module, no installed tt-model: %v", err)
	}
	_, _, err = locateBinaries(ctx, binaryPlan{ServerPath: filepath.Join(bin, "no-such"), Executable: filepath.Join(bin, "tt-model"), Log: testLog{}})
	if err == nil || !strings.Contains(err.Error(), "tt-model-server (runtime.server)") {
		t.Errorf("missing runtime.server: %v", err)
	}
}
