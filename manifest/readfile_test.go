package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Inputs that are not regular files are refused before they are opened: a
// FIFO with no writer would block the open forever, /dev/zero never ends.
func TestLoadRefusesNonRegularInputs(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "tt-model.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, MaxFileBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ path, want string }{
		{fifo, "not a regular file"},
		{"/dev/zero", "not a regular file"},
		{dir, "not a regular file"},
		{big, "larger than a manifest can be"},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := Load(tc.path, Options{})
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
					t.Fatalf("Load(%s) = %v, want an error naming the file and %q", tc.path, err, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("Load(%s) blocked", tc.path)
			}
			if tc.path == dir {
				return // ReadWire reads the tt_kernel_manifest.json inside a directory
			}
			if _, err := ReadWire(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ReadWire(%s) = %v, want %q", tc.path, err, tc.want)
			}
		})
	}
}
