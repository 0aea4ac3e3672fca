package builder

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The image's unprivileged account.
const (
	ttUser   = "tt"
	ImageUID = 1000
	ImageGID = 1000
)

// rootfs tracks what the image's file system holds so far (the base, then
// each of our layers), so a layer adds a parent directory only when nothing
// below provides it.
type rootfs struct {
	tree *fsTree
}

func newRootfs(base *baseImage) *rootfs {
	tree := newFSTree()
	for p, t := range base.Tree.types {
		tree.types[p] = t
	}
	for p, l := range base.Tree.links {
		tree.links[p] = l
	}
	return &rootfs{tree: tree}
}

// layerPlan is the entries of one layer under construction.
type layerPlan struct {
	fs          *rootfs
	description string
	entries     []entry
	added       map[string]bool
}

func (r *rootfs) plan(description string) *layerPlan {
	return &layerPlan{fs: r, description: description, added: map[string]bool{}}
}

// mkdirAll adds root-owned 0755 directories for every missing ancestor of p
// (and p itself). A directory the image already reaches, possibly through a
// symlink (/lib -> usr/lib), is left alone.
func (l *layerPlan) mkdirAll(p string) {
	p = path.Clean(p)
	if p == "/" {
		return
	}
	l.mkdirAll(path.Dir(p))
	if l.fs.tree.isDir(p) || l.added[p] {
		return
	}
	l.entries = append(l.entries, dirEntry(p, 0o755, 0, 0))
	l.added[p] = true
}

// add puts e in the layer after its parents.
func (l *layerPlan) add(e entry) {
	e.Path = path.Clean(e.Path)
	l.mkdirAll(path.Dir(e.Path))
	l.entries = append(l.entries, e)
	l.added[e.Path] = true
}

// done records the layer's paths as present, so the next layer's parents
// are judged against it, and returns the plan for buildLayers.
func (l *layerPlan) done() *layerPlan {
	for _, e := range sortedEntries(l.entries) {
		l.fs.tree.record(e.Path, e.Type, e.Linkname)
	}
	return l
}

// buildLayers writes the planned layers, compressing them concurrently:
// gzip of the binaries is most of an image's assembly time, and each layer's
// bytes depend on its own entries only. A layer whose inputs did not change
// since an earlier build comes from the layer cache.
func buildLayers(plans []*layerPlan, epoch time.Time) ([]layerBlob, error) {
	dir := userCacheDir("layers")
	if dir != "" {
		defer pruneCache(dir)
	}
	blobs := make([]layerBlob, len(plans))
	errs := make([]error, len(plans))
	var wg sync.WaitGroup
	for i, p := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			blobs[i], errs[i] = cachedBuildLayer(dir, p.entries, epoch, p.description)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return blobs, nil
}

// accountFiles returns /etc/passwd and /etc/group with the tt user and group
// (uid/gid 1000) present: the base's files with a line appended, or, on
// scratch, files holding root and tt. A base that gives uid 1000 or the name
// tt to someone else is refused rather than silently patched.
func accountFiles(base *baseImage) (passwd, group []byte, err error) {
	passwd = base.Passwd
	group = base.Group
	if passwd == nil {
		passwd = []byte("root:x:0:0:root:/root:/sbin/nologin\n")
	}
	if group == nil {
		group = []byte("root:x:0:\n")
	}
	passwd, err = ensureAccount(passwd, "/etc/passwd", ttUser, ImageUID,
		fmt.Sprintf("%s:x:%d:%d:tt-model:/home/tt:/sbin/nologin", ttUser, ImageUID, ImageGID), 2)
	if err != nil {
		return nil, nil, err
	}
	group, err = ensureAccount(group, "/etc/group", ttUser, ImageGID, fmt.Sprintf("%s:x:%d:", ttUser, ImageGID), 2)
	if err != nil {
		return nil, nil, err
	}
	return passwd, group, nil
}

// ensureAccount appends line unless an entry named want with id wantID
// (colon-separated field idField) is already there.
func ensureAccount(data []byte, file, want string, wantID int, line string, idField int) ([]byte, error) {
	id := strconv.Itoa(wantID)
	for n, l := range strings.Split(string(data), "\n") {
		f := strings.Split(l, ":")
		if len(f) <= idField {
			continue
		}
		switch {
		case f[0] == want && f[idField] == id:
			return data, nil
		case f[0] == want:
			return nil, fmt.Errorf("runtime.base: %s line %d gives %s id %s; the image runs as %s %d", file, n+1, want, f[idField], want, wantID)
		case f[idField] == id:
			return nil, fmt.Errorf("runtime.base: %s line %d gives id %d to %q; the image runs as %s %d", file, n+1, wantID, f[0], want, wantID)
		}
	}
	out := bytes.Clone(data)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, line+"\n"...), nil
}

// accountsLayer plans the layer of the tt account: /etc/passwd and
// /etc/group with tt (uid and gid 1000) added, HOME with homeMode, /cache
// and /hf writable by tt, and /tmp when the base has none.
func accountsLayer(fs *rootfs, base *baseImage, description string, homeMode int64) (*layerPlan, error) {
	l := fs.plan(description)
	passwd, group, err := accountFiles(base)
	if err != nil {
		return nil, err
	}
	l.add(fileEntry("/etc/passwd", 0o644, passwd))
	l.add(fileEntry("/etc/group", 0o644, group))
	l.add(dirEntry(ImageHomeDir, homeMode, ImageUID, ImageGID))
	l.add(dirEntry(ImageCacheDir, 0o775, ImageUID, ImageGID))
	l.add(dirEntry(ImageHFDir, 0o775, ImageUID, ImageGID))
	if !fs.tree.isDir("/tmp") {
		l.add(dirEntry("/tmp", 0o1777, 0, 0))
	}
	return l.done(), nil
}
