// Package fslink is the tool's one symlink resolver. It answers for an
// image's file system (in memory, or unpacked on disk), where "/" is the
// image's root, and for a host directory whose links must stay inside it: a
// source root a manifest names, or a staged package.
package fslink

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// MaxLinks is how many symlinks one resolution may follow (Linux's 40).
const MaxLinks = 40

var (
	// ErrNotExist ends a resolution at a missing component.
	ErrNotExist = errors.New("no such file or directory")
	// ErrLoop ends a resolution that followed more than MaxLinks links.
	ErrLoop = fmt.Errorf("a symlink loop (more than %d links)", MaxLinks)
	// ErrOutside is a link of a Root that leads out of it.
	ErrOutside = errors.New("outside the root")
)

// Lookup says what an already resolved path q is: its link target when it
// is a symlink, and whether it exists.
type Lookup func(q string) (target string, isLink, exists bool)

// Follow resolves the path p component by component from "/", as the
// kernel does: a symlink's target replaces it (an absolute target restarts
// at "/"), ".." never climbs above "/", at most MaxLinks links. lookup
// tells what each component is, so one resolver serves an image tree in
// memory, one unpacked under a host directory, and the host itself. A
// missing component is ErrNotExist, unless missingOK, when it is kept as
// written (a path about to be created).
func Follow(p string, missingOK bool, lookup Lookup) (string, error) {
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
			return "", fmt.Errorf("%s: %w", next, ErrNotExist)
		}
		if !isLink {
			cur = next
			continue
		}
		if hops++; hops > MaxLinks {
			return "", fmt.Errorf("resolving %s: %w", p, ErrLoop)
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		parts = append(strings.Split(strings.Trim(target, "/"), "/"), parts...)
	}
	return cur, nil
}

// HostLookup is the Lookup of the host file system under dir ("/" for the
// host itself): q is a path inside dir.
func HostLookup(dir string) Lookup {
	return func(q string) (string, bool, bool) {
		host := filepath.Join(dir, filepath.FromSlash(q))
		info, err := os.Lstat(host)
		if err != nil {
			return "", false, false
		}
		if info.Mode()&os.ModeSymlink == 0 {
			return "", false, true
		}
		target, err := os.Readlink(host)
		return target, err == nil, true
	}
}

// OnHost resolves the host path p (made absolute) to the path with no link
// left in it, as the kernel would open it.
func OnHost(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return Follow(abs, false, HostLookup("/"))
}

// LinkError is a symlink of a Root that leaves it, dangles or loops.
type LinkError struct {
	Link     string // the link, slash-separated, relative to the root
	Target   string // its target as written
	Root     string // the root as named
	Resolved string // where it leads; "" when it does not resolve
	Err      error  // ErrOutside, ErrNotExist or ErrLoop
}

func (e *LinkError) Error() string {
	switch {
	case errors.Is(e.Err, ErrOutside):
		return fmt.Sprintf("symlink %s -> %s resolves to %s, outside %s", e.Link, e.Target, e.Resolved, e.Root)
	case errors.Is(e.Err, ErrLoop):
		return fmt.Sprintf("symlink %s -> %s: %v", e.Link, e.Target, ErrLoop)
	}
	return fmt.Sprintf("symlink %s -> %s dangles: %v", e.Link, e.Target, e.Err)
}

func (e *LinkError) Unwrap() error { return e.Err }

// Missing says whether err (from Walk) is a listed path that does not
// exist, as opposed to a link that dangles.
func Missing(err error) bool {
	var linkErr *LinkError
	return errors.Is(err, ErrNotExist) && !errors.As(err, &linkErr)
}

// Root is a host directory whose links must resolve inside it.
type Root struct {
	dir  string // as named, for messages
	real string // dir with no link left in it
}

// NewRoot opens the directory dir as a Root.
func NewRoot(dir string) (*Root, error) {
	real, err := OnHost(dir)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", dir, err)
	}
	info, err := os.Stat(real)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	return &Root{dir: dir, real: real}, nil
}

// Dir is the root as named.
func (r *Root) Dir() string { return r.dir }

// Real is the root with no link left in it.
func (r *Root) Real() string { return r.real }

// Contains says whether the resolved host path p is the root or below it.
func (r *Root) Contains(p string) bool {
	return p == r.real || strings.HasPrefix(p, strings.TrimSuffix(r.real, "/")+"/")
}

// Link resolves the symlink at the host path p (under the root as named,
// or under its resolved path) and checks that it stays inside the root. It
// returns the target as written and the resolved host path, or a
// *LinkError.
func (r *Root) Link(p string) (target, resolved string, err error) {
	rel, err := filepath.Rel(r.dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		if rel, err = filepath.Rel(r.real, p); err != nil {
			return "", "", err
		}
	}
	return r.link(p, filepath.ToSlash(rel))
}

// link is Link for a link named rel in messages.
func (r *Root) link(p, rel string) (target, resolved string, err error) {
	if target, err = os.Readlink(p); err != nil {
		return "", "", err
	}
	linkErr := &LinkError{Link: rel, Target: target, Root: r.dir}
	if resolved, err = OnHost(p); err != nil {
		linkErr.Err = err
		return target, "", linkErr
	}
	if !r.Contains(resolved) {
		linkErr.Resolved, linkErr.Err = resolved, ErrOutside
		return target, resolved, linkErr
	}
	return target, resolved, nil
}

// Entry is one object Walk visits.
type Entry struct {
	Path string      // on the host, through resolved directories
	Rel  string      // slash-separated, relative to the root, as listed
	Type fs.FileMode // the type bits: fs.ModeDir, fs.ModeSymlink, 0 for a regular file, ...
	// Target and Resolved are a link's target as written and the host path
	// it resolves to; Err is the link's *LinkError when it leaves the root,
	// dangles or loops (then Resolved may be empty).
	Target, Resolved string
	Err              error
}

// Walk visits rel (a relative slash path inside the root) and, when it is a
// directory, everything below it in lexical order. Links are never
// followed: each is visited as itself, its target resolved and checked
// (Entry.Err), and fn decides whether a bad one stops the walk. The
// directories leading to rel may be links, as long as they resolve inside
// the root. fn returning filepath.SkipDir skips a directory; another error
// ends the walk with it.
func (r *Root) Walk(rel string, fn func(Entry) error) error {
	rel = path.Clean(filepath.ToSlash(rel))
	if path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%s is not a relative path inside %s", rel, r.dir)
	}
	// The directories on the way to rel may be links, each checked as the
	// walk checks the links below rel.
	start := r.real
	if rel != "." {
		parts := strings.Split(rel, "/")
		for i := range parts {
			start = filepath.Join(start, parts[i])
			info, err := os.Lstat(start)
			if err != nil {
				return fmt.Errorf("%s: %w", rel, ErrNotExist)
			}
			if i < len(parts)-1 && info.Mode()&os.ModeSymlink != 0 {
				_, resolved, err := r.link(start, strings.Join(parts[:i+1], "/"))
				if err != nil {
					return err
				}
				start = resolved
			}
		}
	}
	return filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walk %s: %w", p, err)
		}
		sub, _ := filepath.Rel(start, p)
		e := Entry{Path: p, Rel: path.Join(rel, filepath.ToSlash(sub)), Type: d.Type()}
		if e.Type&fs.ModeSymlink != 0 {
			e.Target, e.Resolved, e.Err = r.link(p, e.Rel)
		}
		return fn(e)
	})
}
