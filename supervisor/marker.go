package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The hang marker is a file that says "the chips may be hung": written on a
// hang (by the server or by us), removed only after a reset whose chip check
// passed. With --reset-on-start auto it makes the next start reset first, so
// it must live on a persistent volume in a container.

func markerExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func writeMarker(path, reason string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("hang marker %s: %w", path, err)
	}
	line := fmt.Sprintf("%s pid=%d %s\n", time.Now().UTC().Format(time.RFC3339), os.Getpid(), reason)
	if err := os.WriteFile(path, []byte(line), 0o644); err != nil {
		return fmt.Errorf("hang marker %s: %w", path, err)
	}
	return nil
}

func removeMarker(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("hang marker %s: %w", path, err)
	}
	return nil
}
