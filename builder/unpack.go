package builder

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// unpackRootfs writes the flattened file system of img under dir: files,
// directories, symlinks and hard links with their permission bits. Owners
// are left to the caller's uid (only a verify run reads this tree). A name
// or link that would land outside dir is refused.
func unpackRootfs(img v1.Image, dir string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var dirs []*tar.Header
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read image file system: %w", err)
		}
		rel := path.Clean("/" + hdr.Name)
		if rel == "/" {
			continue
		}
		target := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			dirs = append(dirs, hdr)
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode|0o200)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("write %s: %w", rel, err)
			}
		case tar.TypeSymlink:
			if err := os.Symlink(hdr.Linkname, target); err != nil {
				return fmt.Errorf("symlink %s: %w", rel, err)
			}
		case tar.TypeLink:
			src := path.Clean("/" + hdr.Linkname)
			if strings.HasPrefix(src, "/..") {
				return fmt.Errorf("hard link %s points outside the image", rel)
			}
			if err := os.Link(filepath.Join(dir, filepath.FromSlash(src)), target); err != nil {
				return fmt.Errorf("hard link %s: %w", rel, err)
			}
		default:
			// Device nodes and fifos cannot be made unprivileged and no
			// verify step needs them.
		}
	}
	// Directory modes last, so a read-only directory does not stop its own
	// extraction.
	for _, hdr := range dirs {
		target := filepath.Join(dir, filepath.FromSlash(path.Clean("/"+hdr.Name)))
		m := hdr.FileInfo().Mode()
		if err := os.Chmod(target, m.Perm()|m&os.ModeSticky|0o700); err != nil {
			return err
		}
	}
	return nil
}
