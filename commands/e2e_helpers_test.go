package commands

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/hub/hubtest"
	"github.com/ttmodel/tt-model/models/rfdetr"
)

// buildCLI builds tt-model and tt-model-server from the repository at root
// into one temporary folder (tt-model finds the server beside it) and
// returns tt-model's path.
func buildCLI(t *testing.T, root string) string {
	t.Helper()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin, "./cmd/tt-model", "./cmd/tt-model-server")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return filepath.Join(bin, "tt-model")
}

// rfdetrHubFiles is a random full-size RF-DETR-base checkpoint (seed 11) as
// the files of a Hub commit: the real weights cannot be downloaded here.
func rfdetrHubFiles(t *testing.T) []hubtest.File {
	t.Helper()
	ckpt := t.TempDir()
	if err := (rfdetr.RandomCheckpoint{Seed: 11}).Write(ckpt); err != nil {
		t.Fatal(err)
	}
	var files []hubtest.File
	for _, name := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(ckpt, name))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, hubtest.File{Path: name, Data: b, LFS: strings.HasSuffix(name, ".safetensors")})
	}
	return files
}
