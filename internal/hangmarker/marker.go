// Package hangmarker is the hang marker: a file that says "the chips may be hung". The server's
// watchdog or the supervisor writes it on a hang; the supervisor removes it only after a reset
// whose chip check passed, and with PI05_RESET_ON_START=auto resets before a start while it
// exists. In a container it must live on a persistent volume.
package hangmarker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Default is $PI05_HANG_MARKER, else ~/.cache/pi05/hang_marker (the seed's default).
func Default(getenv func(string) string) string {
	if p := getenv("PI05_HANG_MARKER"); p != "" {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "/root"
	}
	return filepath.Join(home, ".cache", "pi05", "hang_marker")
}

// Exists reports whether the marker is there.
func Exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Write writes the marker with the time, this process and why.
func Write(path, why string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("hang marker %s: %w", path, err)
	}
	line := fmt.Sprintf("%s pid=%d %s\n", time.Now().UTC().Format(time.RFC3339), os.Getpid(), why)
	if err := os.WriteFile(path, []byte(line), 0o644); err != nil {
		return fmt.Errorf("hang marker %s: %w", path, err)
	}
	return nil
}

// Remove removes the marker (absent is fine).
func Remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("hang marker %s: %w", path, err)
	}
	return nil
}
