package builder

import (
	"archive/tar"
	"path"

	"github.com/ttmodel/tt-model/internal/fslink"
)

// fsTree is the shape of an image's file system: the tar type of every path
// and the target of every symlink, so the builder can ask what a path means
// inside the image ("/bin/sh" through a usrmerge /bin -> usr/bin).
type fsTree struct {
	types map[string]byte
	links map[string]string
}

func newFSTree() *fsTree {
	return &fsTree{types: map[string]byte{"/": tar.TypeDir}, links: map[string]string{}}
}

// record notes that p (as written in a layer) now holds an object of typ;
// the parent is resolved first, as extraction would.
func (t *fsTree) record(p string, typ byte, link string) {
	dir, _, ok := t.resolve(path.Dir(path.Clean(p)))
	if !ok {
		dir = path.Dir(path.Clean(p))
	}
	full := path.Join(dir, path.Base(p))
	t.types[full] = typ
	if typ == tar.TypeSymlink {
		t.links[full] = link
	} else {
		delete(t.links, full)
	}
}

// resolve follows symlinks in p the way the kernel would inside the image
// and returns the final path and its type; ok is false when it does not
// exist.
func (t *fsTree) resolve(p string) (string, byte, bool) {
	cur, err := fslink.Follow(p, false, func(q string) (string, bool, bool) {
		typ, ok := t.types[q]
		return t.links[q], typ == tar.TypeSymlink, ok
	})
	if err != nil {
		return "", 0, false
	}
	return cur, t.types[cur], true
}

// isDir says whether p resolves to a directory.
func (t *fsTree) isDir(p string) bool {
	_, typ, ok := t.resolve(p)
	return ok && typ == tar.TypeDir
}

// isFile says whether p resolves to something other than a directory.
func (t *fsTree) isFile(p string) bool {
	_, typ, ok := t.resolve(p)
	return ok && typ != tar.TypeDir
}
