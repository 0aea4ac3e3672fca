package oci

import "path"

// Rootfs tracks what the image's file system holds so far (the base, then
// each of our layers), so a layer adds a parent directory only when nothing
// below provides it.
type Rootfs struct {
	Tree *Tree
}

// NewRootfs starts from the base's tree (copied: the base's stays as read).
func NewRootfs(base *Tree) *Rootfs {
	tree := NewTree()
	for p, t := range base.Types {
		tree.Types[p] = t
	}
	for p, l := range base.Links {
		tree.Links[p] = l
	}
	return &Rootfs{Tree: tree}
}

// LayerPlan is the entries of one layer under construction.
type LayerPlan struct {
	fs          *Rootfs
	Description string
	Entries     []Entry
	added       map[string]bool
}

// Plan starts a layer on top of what the image holds so far.
func (r *Rootfs) Plan(description string) *LayerPlan {
	return &LayerPlan{fs: r, Description: description, added: map[string]bool{}}
}

// MkdirAll adds root-owned 0755 directories for every missing ancestor of p
// (and p itself). A directory the image already reaches, possibly through a
// symlink (/lib -> usr/lib), is left alone.
func (l *LayerPlan) MkdirAll(p string) {
	p = path.Clean(p)
	if p == "/" {
		return
	}
	l.MkdirAll(path.Dir(p))
	if l.fs.Tree.IsDir(p) || l.added[p] {
		return
	}
	l.Entries = append(l.Entries, DirEntry(p, 0o755, 0, 0))
	l.added[p] = true
}

// Add puts e in the layer after its parents.
func (l *LayerPlan) Add(e Entry) {
	e.Path = path.Clean(e.Path)
	l.MkdirAll(path.Dir(e.Path))
	l.Entries = append(l.Entries, e)
	l.added[e.Path] = true
}

// Done records the layer's paths as present, so the next layer's parents
// are judged against it, and returns the plan for buildLayers.
func (l *LayerPlan) Done() *LayerPlan {
	for _, e := range SortedEntries(l.Entries) {
		l.fs.Tree.Record(e.Path, e.Type, e.Linkname)
	}
	return l
}
