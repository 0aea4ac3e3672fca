package oci

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// SharedObject is one file the dynamic loader needs at run time: where it was
// found on this machine and where it goes in the image. The two differ only
// for objects found through an $ORIGIN-relative search path, which must stay
// at the same place relative to the binary that asked for them.
type SharedObject struct {
	Name      string // the DT_NEEDED entry, or the interpreter path
	HostPath  string
	ImagePath string
	// ViaCache is true when only the ld.so.conf directories found it: an image
	// has no ld.so.cache, so the directory must be on LD_LIBRARY_PATH unless it
	// is one of the loader's built-in defaults.
	ViaCache bool
}

// Closure is what a dynamically linked executable needs besides itself.
type Closure struct {
	Interpreter *SharedObject  // nil for a static binary
	Libraries   []SharedObject // sorted by ImagePath
}

// Static says whether the binary needs nothing from the image at run time.
func (c Closure) Static() bool { return c.Interpreter == nil && len(c.Libraries) == 0 }

// LibSearch holds the machine-wide part of the loader's search: the
// directories of /etc/ld.so.conf (what ld.so.cache indexes) and the loader's
// built-in trusted directories. root prefixes every absolute path read, so a
// test can point it at a fake tree.
type LibSearch struct {
	root        string
	confDirs    []string
	defaultDirs []string
}

// defaultLibDirs are glibc's trusted directories on x86_64 Debian/Ubuntu and
// the generic ones; a loader searches them even without an ld.so.cache.
var defaultLibDirs = []string{
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
	"/lib64", "/usr/lib64", "/lib", "/usr/lib",
}

// NewLibSearch reads /etc/ld.so.conf (with its include globs) under root.
func NewLibSearch(root string) (*LibSearch, error) {
	s := &LibSearch{root: root, defaultDirs: defaultLibDirs}
	seen := map[string]bool{}
	if err := s.readConf("/etc/ld.so.conf", seen, 0); err != nil {
		return nil, err
	}
	return s, nil
}

// ConfDirs are the directories /etc/ld.so.conf names (includes followed),
// in its order.
func (s *LibSearch) ConfDirs() []string { return s.confDirs }

func (s *LibSearch) host(p string) string { return filepath.Join(s.root, p) }

func (s *LibSearch) readConf(file string, seen map[string]bool, depth int) error {
	if depth > 8 || seen[file] {
		return nil // include cycles are ignored, as ldconfig does
	}
	seen[file] = true
	b, err := os.ReadFile(s.host(file))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if fields[0] == "include" {
			for _, pattern := range fields[1:] {
				if !path.IsAbs(pattern) {
					pattern = path.Join(path.Dir(file), pattern)
				}
				matches, err := filepath.Glob(s.host(pattern))
				if err != nil {
					return fmt.Errorf("%s: include %s: %w", file, pattern, err)
				}
				sort.Strings(matches)
				for _, m := range matches {
					rel, _ := filepath.Rel(s.root, m)
					if err := s.readConf("/"+filepath.ToSlash(rel), seen, depth+1); err != nil {
						return err
					}
				}
			}
			continue
		}
		for _, dir := range strings.Split(strings.Join(fields, " "), ",") {
			dir = strings.TrimSpace(dir)
			if path.IsAbs(dir) {
				s.confDirs = append(s.confDirs, path.Clean(dir))
			}
		}
	}
	return nil
}

// elfObject is a parsed ELF file with what the search needs from it.
type elfObject struct {
	hostPath  string
	imagePath string
	class     elf.Class
	machine   elf.Machine
	needed    []string
	rpath     []string
	runpath   []string
	interp    string
}

func openELF(hostPath, imagePath string) (*elfObject, error) {
	f, err := elf.Open(hostPath)
	if err != nil {
		return nil, fmt.Errorf("read ELF %s: %w", hostPath, err)
	}
	defer f.Close()
	o := &elfObject{hostPath: hostPath, imagePath: imagePath, class: f.Class, machine: f.Machine}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return nil, fmt.Errorf("read PT_INTERP of %s: %w", hostPath, err)
			}
			o.interp = strings.TrimRight(string(b), "\x00")
		}
	}
	if f.Section(".dynamic") == nil {
		return o, nil
	}
	if o.needed, err = f.ImportedLibraries(); err != nil {
		return nil, fmt.Errorf("DT_NEEDED of %s: %w", hostPath, err)
	}
	for _, tag := range []struct {
		t   elf.DynTag
		dst *[]string
	}{{elf.DT_RPATH, &o.rpath}, {elf.DT_RUNPATH, &o.runpath}} {
		vals, err := f.DynString(tag.t)
		if err != nil {
			return nil, fmt.Errorf("%v of %s: %w", tag.t, hostPath, err)
		}
		for _, v := range vals {
			*tag.dst = append(*tag.dst, strings.Split(v, ":")...)
		}
	}
	return o, nil
}

// searchDir is one directory to try, with where it sits on the host and in
// the image ($ORIGIN makes them differ).
type searchDir struct{ host, image string }

// expandOrigin turns an RPATH/RUNPATH entry of o into a search directory;
// ok is false for an entry relative to the working directory (empty or not
// absolute), which the image cannot reproduce. $LIB and $PLATFORM are
// refused rather than guessed.
func (s *LibSearch) expandOrigin(o *elfObject, dir string) (sd searchDir, ok bool, err error) {
	if strings.Contains(dir, "$LIB") || strings.Contains(dir, "${LIB}") ||
		strings.Contains(dir, "$PLATFORM") || strings.Contains(dir, "${PLATFORM}") {
		return searchDir{}, false, fmt.Errorf("%s: search path %q uses $LIB/$PLATFORM, which the builder does not expand", o.hostPath, dir)
	}
	for _, tok := range []string{"${ORIGIN}", "$ORIGIN"} {
		if strings.Contains(dir, tok) {
			hostDir := filepath.Dir(o.hostPath)
			return searchDir{
				host:  path.Clean(strings.ReplaceAll(dir, tok, hostDir)),
				image: path.Clean(strings.ReplaceAll(dir, tok, path.Dir(o.imagePath))),
			}, true, nil
		}
	}
	if !path.IsAbs(dir) {
		return searchDir{}, false, nil
	}
	return searchDir{host: s.host(dir), image: path.Clean(dir)}, true, nil
}

// ResolveELFClosure walks DT_NEEDED from the executable at hostPath (placed
// at imagePath) the way glibc's loader does: a name with a slash is a path;
// otherwise DT_RPATH of the requesting object and its loaders (only while
// the requester has no DT_RUNPATH), then DT_RUNPATH of the requester, then
// the ld.so.conf directories, then the trusted defaults. LD_LIBRARY_PATH is
// deliberately not read: the image must not depend on the builder's shell.
// A candidate of another ELF class or machine is skipped, as the loader does.
func (s *LibSearch) ResolveELFClosure(hostPath, imagePath string) (Closure, error) {
	exe, err := openELF(hostPath, imagePath)
	if err != nil {
		return Closure{}, err
	}
	var c Closure
	if exe.interp != "" {
		host := s.host(exe.interp)
		if _, err := os.Stat(host); err != nil {
			return Closure{}, fmt.Errorf("%s: interpreter %s: %w", hostPath, exe.interp, err)
		}
		c.Interpreter = &SharedObject{Name: exe.interp, HostPath: host, ImagePath: exe.interp}
	}
	// The loader is already mapped when libraries ask for it by soname
	// (libc needs ld-linux-x86-64.so.2): it must not be found a second time.
	interpNames := map[string]bool{}
	if exe.interp != "" {
		interpNames[path.Base(exe.interp)] = true
		if soname, err := elfSoname(s.host(exe.interp)); err == nil && soname != "" {
			interpNames[soname] = true
		}
	}
	found := map[string]*elfObject{} // DT_NEEDED name -> object, as the loader dedups by soname
	byImage := map[string]bool{}
	type pending struct {
		name  string
		chain []*elfObject // requester last
	}
	queue := []pending{}
	for _, n := range exe.needed {
		queue = append(queue, pending{n, []*elfObject{exe}})
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if _, ok := found[p.name]; ok || interpNames[p.name] {
			continue
		}
		obj, viaCache, err := s.locate(p.name, p.chain, exe)
		if err != nil {
			return Closure{}, err
		}
		found[p.name] = obj
		if !byImage[obj.imagePath] {
			byImage[obj.imagePath] = true
			c.Libraries = append(c.Libraries, SharedObject{Name: p.name, HostPath: obj.hostPath, ImagePath: obj.imagePath, ViaCache: viaCache})
		}
		chain := append(append([]*elfObject(nil), p.chain...), obj)
		for _, n := range obj.needed {
			queue = append(queue, pending{n, chain})
		}
	}
	sort.Slice(c.Libraries, func(i, j int) bool { return c.Libraries[i].ImagePath < c.Libraries[j].ImagePath })
	return c, nil
}

func elfSoname(hostPath string) (string, error) {
	f, err := elf.Open(hostPath)
	if err != nil {
		return "", err
	}
	defer f.Close()
	names, err := f.DynString(elf.DT_SONAME)
	if err != nil || len(names) == 0 {
		return "", err
	}
	return names[0], nil
}

func (s *LibSearch) locate(name string, chain []*elfObject, exe *elfObject) (*elfObject, bool, error) {
	requester := chain[len(chain)-1]
	if strings.Contains(name, "/") {
		o, err := s.candidate(searchDir{host: s.host(path.Dir(name)), image: path.Dir(name)}, path.Base(name), exe)
		if err != nil || o == nil {
			return nil, false, fmt.Errorf("%s needs %s, which is not a usable ELF object: %v", requester.hostPath, name, err)
		}
		return o, false, nil
	}
	var dirs []searchDir
	if len(requester.runpath) == 0 {
		for i := len(chain) - 1; i >= 0; i-- {
			for _, d := range chain[i].rpath {
				sd, ok, err := s.expandOrigin(chain[i], d)
				if err != nil {
					return nil, false, err
				}
				if ok {
					dirs = append(dirs, sd)
				}
			}
		}
	}
	for _, d := range requester.runpath {
		sd, ok, err := s.expandOrigin(requester, d)
		if err != nil {
			return nil, false, err
		}
		if ok {
			dirs = append(dirs, sd)
		}
	}
	for _, d := range dirs {
		if o, err := s.candidate(d, name, exe); err != nil {
			return nil, false, err
		} else if o != nil {
			return o, false, nil
		}
	}
	for _, d := range s.confDirs {
		if o, err := s.candidate(searchDir{host: s.host(d), image: d}, name, exe); err != nil {
			return nil, false, err
		} else if o != nil {
			return o, !isDefaultLibDir(d), nil
		}
	}
	for _, d := range s.defaultDirs {
		if o, err := s.candidate(searchDir{host: s.host(d), image: d}, name, exe); err != nil {
			return nil, false, err
		} else if o != nil {
			return o, false, nil
		}
	}
	return nil, false, fmt.Errorf("%s needs %s, which the loader would not find (searched its RPATH/RUNPATH, /etc/ld.so.conf and %s)",
		requester.hostPath, name, strings.Join(s.defaultDirs, ", "))
}

// candidate returns the object dir/name when it exists and matches the
// executable's class and machine, nil when the loader would pass it by.
func (s *LibSearch) candidate(d searchDir, name string, exe *elfObject) (*elfObject, error) {
	host := filepath.Join(d.host, name)
	info, err := os.Stat(host)
	if err != nil || !info.Mode().IsRegular() {
		return nil, nil
	}
	o, err := openELF(host, path.Join(d.image, name))
	if err != nil {
		return nil, nil // not ELF: the loader skips it too
	}
	if o.class != exe.class || o.machine != exe.machine {
		return nil, nil
	}
	return o, nil
}

func isDefaultLibDir(d string) bool {
	for _, x := range defaultLibDirs {
		if x == d {
			return true
		}
	}
	return false
}

// ExtraLibraryPath lists, sorted, the directories that only ld.so.cache would
// have found: the image needs them on LD_LIBRARY_PATH.
func (c Closure) ExtraLibraryPath() []string {
	set := map[string]bool{}
	for _, l := range c.Libraries {
		if l.ViaCache {
			set[path.Dir(l.ImagePath)] = true
		}
	}
	out := make([]string, 0, len(set))
	for d := range set {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
