package oci

import (
	"archive/tar"
	"path"

	"github.com/ttmodel/tt-model/internal/fslink"
)

// Tree is the shape of an image's file system: the tar type of every path
// and the target of every symlink, so the builder can ask what a path means
// inside the image ("/bin/sh" through a usrmerge /bin -> usr/bin).
type Tree struct {
	Types map[string]byte   // the tar type of every path
	Links map[string]string // the target of every symlink
}

// NewTree is a tree holding only the root directory.
func NewTree() *Tree {
	return &Tree{Types: map[string]byte{"/": tar.TypeDir}, Links: map[string]string{}}
}

// Record notes that p (as written in a layer) now holds an object of typ;
// the parent is resolved first, as extraction would.
func (t *Tree) Record(p string, typ byte, link string) {
	dir, _, ok := t.Resolve(path.Dir(path.Clean(p)))
	if !ok {
		dir = path.Dir(path.Clean(p))
	}
	full := path.Join(dir, path.Base(p))
	t.Types[full] = typ
	if typ == tar.TypeSymlink {
		t.Links[full] = link
	} else {
		delete(t.Links, full)
	}
}

// Resolve follows symlinks in p the way the kernel would inside the image
// and returns the final path and its type; ok is false when it does not
// exist.
func (t *Tree) Resolve(p string) (string, byte, bool) {
	cur, err := fslink.Follow(p, false, func(q string) (string, bool, bool) {
		typ, ok := t.Types[q]
		return t.Links[q], typ == tar.TypeSymlink, ok
	})
	if err != nil {
		return "", 0, false
	}
	return cur, t.Types[cur], true
}

// IsDir says whether p resolves to a directory.
func (t *Tree) IsDir(p string) bool {
	_, typ, ok := t.Resolve(p)
	return ok && typ == tar.TypeDir
}

// IsFile says whether p resolves to something other than a directory.
func (t *Tree) IsFile(p string) bool {
	_, typ, ok := t.Resolve(p)
	return ok && typ != tar.TypeDir
}
