// Package ocilayout reads, writes and checks OCI image layouts on disk. It
// opens an image by its index.json name, writes a layout atomically, and
// checks that every blob under blobs/sha256 holds what its name says (the
// builder on its own output before publishing a package, the runner on a
// pulled one).
package ocilayout

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// VerifyBlobs hashes every blob of the layout at dir and fails on the first
// whose sha256 is not its name. skip, when set, names blobs already known
// good (for example cache links named by a verified digest); they are not
// read.
func VerifyBlobs(dir string, skip func(name, path string) bool) error {
	blobs := filepath.Join(dir, "blobs", "sha256")
	entries, err := os.ReadDir(blobs)
	if err != nil {
		return fmt.Errorf("image layout %s: %w", dir, err)
	}
	for _, e := range entries {
		p := filepath.Join(blobs, e.Name())
		if skip != nil && skip(e.Name(), p) {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("read image blob %s: %w", e.Name(), err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != e.Name() {
			return fmt.Errorf("image blob %s is corrupt: its content hashes to sha256 %s", e.Name(), got)
		}
	}
	return nil
}
