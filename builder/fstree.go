package builder

import (
	"archive/tar"
	"errors"
	"fmt"
	"path"
	"strings"
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
	cur, err := followLinks(p, false, func(q string) (string, bool, bool) {
		typ, ok := t.types[q]
		return t.links[q], typ == tar.TypeSymlink, ok
	})
	if err != nil {
		return "", 0, false
	}
	return cur, t.types[cur], true
}

// maxLinks is how many symlinks one resolution may follow (Linux's 40).
const maxLinks = 40

// errNotExist ends a resolution at a missing component.
var errNotExist = errors.New("no such file or directory")

// followLinks is the builder's one symlink resolver, for an image tree in
// memory (fsTree) and one unpacked on disk (resolveIn) alike: it resolves
// the image path p component by component from "/", as the kernel does
// inside the image: a symlink's target replaces it (an absolute target
// restarts at "/"), ".." never climbs above "/", at most maxLinks links.
// lookup says what an already resolved path q is: its link target when it
// is a symlink, and whether it exists. A missing component is errNotExist,
// unless missingOK, when it is kept as written (a path about to be created).
func followLinks(p string, missingOK bool, lookup func(q string) (target string, isLink, exists bool)) (string, error) {
	parts := strings.Split(strings.Trim(path.Clean("/"+p), "/"), "/")
	cur := "/"
	for hops := 0; len(parts) > 0; {
		part := parts[0]
		parts = parts[1:]
		if part == "" || part == "." {
			continue
		}
		next := path.Join(cur, part)
		target, isLink, exists := lookup(next)
		if !exists && !missingOK {
			return "", fmt.Errorf("%s: %w", next, errNotExist)
		}
		if !isLink {
			cur = next
			continue
		}
		if hops++; hops > maxLinks {
			return "", fmt.Errorf("more than %d symlinks resolving %s", maxLinks, p)
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		parts = append(strings.Split(strings.Trim(target, "/"), "/"), parts...)
	}
	return cur, nil
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
