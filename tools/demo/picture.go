package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ttmodel/tt-model/internal/demopicture"
)

// writePicture writes the sample picture (the one the server's console
// offers too).
func writePicture(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, demopicture.PNG(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
