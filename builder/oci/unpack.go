package oci

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

	"github.com/ttmodel/tt-model/internal/fslink"
)

// UnpackRootfs applies the layers of img under dir, bottom layer first, as a
// container runtime does: whiteouts delete, opaque markers clear, a later
// Entry replaces an earlier one, and a path through a symlink of a lower
// layer (/lib64 -> usr/lib64) follows it inside dir. Owners are left to the
// caller's uid: only a verify run reads this tree.
//
// Why not go-containerregistry's mutate.Extract (which base.scan uses for
// the flattened path list): it emits the top layer first, so an entry our
// own layers write through a base symlink (the ELF interpreter at
// /lib64/ld-linux-x86-64.so.2 on a usrmerge base) would be extracted before
// the symlink it goes through, as a directory in its way. Replaying layers
// bottom first keeps the image's view.
func UnpackRootfs(img v1.Image, dir string) error {
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("layers: %w", err)
	}
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		err = applyLayer(tar.NewReader(rc), dir)
		rc.Close()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
	}
	return nil
}

// applyLayer unpacks one layer's tar stream over root, honouring whiteouts;
// folders get their modes once the layer is done, so a read-only folder can
// still be filled.
func applyLayer(tr *tar.Reader, root string) error {
	type dirMode struct {
		path string
		mode os.FileMode
	}
	var dirs []dirMode
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		rel := path.Clean("/" + hdr.Name)
		if rel == "/" {
			continue
		}
		parent, err := ResolveIn(root, path.Dir(rel))
		if err != nil {
			return err
		}
		base := path.Base(rel)
		if base == ".wh..wh..opq" {
			entries, _ := os.ReadDir(parent)
			for _, e := range entries {
				if err := os.RemoveAll(filepath.Join(parent, e.Name())); err != nil {
					return err
				}
			}
			continue
		}
		if gone, ok := strings.CutPrefix(base, ".wh."); ok {
			if err := os.RemoveAll(filepath.Join(parent, gone)); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return err
		}
		target := filepath.Join(parent, base)
		mode := hdr.FileInfo().Mode()
		if info, err := os.Lstat(target); err == nil && !(info.IsDir() && hdr.Typeflag == tar.TypeDir) {
			if err := os.RemoveAll(target); err != nil {
				return err
			}
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			dirs = append(dirs, dirMode{target, mode})
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode.Perm()|0o200)
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
			src, err := ResolveIn(root, path.Clean("/"+hdr.Linkname))
			if err != nil {
				return err
			}
			if err := os.Link(src, target); err != nil {
				return fmt.Errorf("hard link %s: %w", rel, err)
			}
		default:
			// Device nodes and fifos cannot be made unprivileged, and no
			// verify step needs them.
		}
	}
	// Directory modes last, so a read-only directory does not stop its own
	// extraction; the owner keeps rwx so a later layer can write into it.
	for _, d := range dirs {
		if err := os.Chmod(d.path, d.mode.Perm()|d.mode&os.ModeSticky|0o700); err != nil {
			return err
		}
	}
	return nil
}

// ResolveIn maps an image path to a host path under root, following the
// symlinks of the tree already unpacked there as the image would see them
// (fslink.Follow): an absolute link target restarts at root, and ".."
// never leaves it. Missing components are kept: the path may be about to
// be made.
func ResolveIn(root, p string) (string, error) {
	resolved, err := fslink.Follow(p, true, fslink.HostLookup(root))
	if err != nil {
		return "", err
	}
	return filepath.Join(root, filepath.FromSlash(resolved)), nil
}
