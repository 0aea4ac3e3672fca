// Package memlimit sets the Go runtime's memory limit (debug.SetMemoryLimit) from the memory limit
// of the cgroup the process runs in, less the memory a model's native program holds outside the
// Go heap, so the garbage collector works harder before the container is out of memory instead of
// letting the kernel's OOM killer end the server. A GOMEMLIMIT the user set is left alone.
package memlimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// unlimitedV1 is the smallest value cgroup v1 reports for "no limit" (PAGE_COUNTER_MAX pages,
// rounded down to a page: 9223372036854771712 on 4 KiB pages); anything from it up is no limit.
const unlimitedV1 = 1 << 62

// MinGoLimit is the lowest limit set: below it the collector would run without pause. A cgroup
// that leaves the Go heap less is said in a warning; the container will likely run out anyway.
const MinGoLimit = 64 << 20

// Cgroup is the memory limit of a process's cgroup.
type Cgroup struct {
	Limit int64  // bytes; 0 when no cgroup along the path has one
	File  string // the file that set it (memory.max or memory.limit_in_bytes), under root
}

// ReadCgroup reads the memory limit of the cgroup this process is in, from the files under root
// ("/" in production; tests give a fake tree): the lowest cgroup v2 memory.max from the process's
// cgroup up to the root of its hierarchy, else (no v2 memory controller) the lowest cgroup v1
// memory.limit_in_bytes likewise. The cgroup's folder is found as the kernel tells it: the path in
// /proc/self/cgroup, under the mount point /proc/self/mountinfo gives that hierarchy (relative to
// the mount's root, so a container that sees only its own cgroup is read right).
func ReadCgroup(root string) (Cgroup, error) {
	cgroups, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return Cgroup{}, fmt.Errorf("cgroup memory limit: %w", err)
	}
	mounts, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return Cgroup{}, fmt.Errorf("cgroup memory limit: %w", err)
	}
	v2path, v1path := "", ""
	for _, line := range strings.Split(string(cgroups), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			v2path = f[2]
		case hasWord(f[1], ",", "memory"):
			v1path = f[2]
		}
	}
	for _, h := range []struct {
		path, fstype, option, file string
	}{
		{v2path, "cgroup2", "", "memory.max"},
		{v1path, "cgroup", "memory", "memory.limit_in_bytes"},
	} {
		if h.path == "" {
			continue
		}
		mountPoint, mountRoot, ok := findMount(mounts, h.fstype, h.option)
		if !ok {
			continue
		}
		cg, found, err := lowestLimit(root, mountPoint, mountRoot, h.path, h.file)
		if err != nil || found {
			return cg, err
		}
	}
	return Cgroup{}, nil
}

// hasWord reports whether list, split at sep, holds word.
func hasWord(list, sep, word string) bool {
	for _, w := range strings.Split(list, sep) {
		if w == word {
			return true
		}
	}
	return false
}

// findMount finds the mount of a cgroup hierarchy in mountinfo: fstype cgroup2, or cgroup with
// option among its super options ("memory").
func findMount(mountinfo []byte, fstype, option string) (mountPoint, mountRoot string, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		// id parent major:minor root mount-point options [optional…] - fstype source super-options
		pre, post, found := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !found || len(f) < 5 || len(g) < 3 || g[0] != fstype {
			continue
		}
		if option != "" && !hasWord(g[2], ",", option) {
			continue
		}
		return unescape(f[4]), unescape(f[3]), true
	}
	return "", "", false
}

// unescape undoes mountinfo's octal escapes (\040 for a blank).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// lowestLimit reads file in the cgroup's folder and each parent up to the mount point and returns
// the lowest limit set; found is false when no folder has the file (no such controller there).
func lowestLimit(root, mountPoint, mountRoot, cgroupPath, file string) (cg Cgroup, found bool, err error) {
	rel, ok := strings.CutPrefix(path.Clean(cgroupPath), path.Clean(mountRoot))
	if !ok || mountRoot != "/" && rel != "" && rel[0] != '/' {
		rel = "" // the cgroup is outside what this mount shows: its root is all there is
	}
	dir := path.Join(mountPoint, rel)
	for {
		name := filepath.Join(root, dir, file)
		b, rerr := os.ReadFile(name)
		switch {
		case rerr == nil:
			found = true
			limit, err := parseLimit(strings.TrimSpace(string(b)))
			if err != nil {
				return Cgroup{}, true, fmt.Errorf("cgroup memory limit: %s: %w", filepath.Join(dir, file), err)
			}
			if limit > 0 && (cg.Limit == 0 || limit < cg.Limit) {
				cg = Cgroup{Limit: limit, File: filepath.Join(dir, file)}
			}
		case !errors.Is(rerr, fs.ErrNotExist):
			return Cgroup{}, true, fmt.Errorf("cgroup memory limit: %w", rerr)
		}
		if dir == path.Clean(mountPoint) || dir == "/" {
			return cg, found, nil
		}
		dir = path.Dir(dir)
	}
}

// parseLimit reads memory.max ("max" or bytes) or memory.limit_in_bytes (bytes; huge means none):
// 0 for no limit.
func parseLimit(s string) (int64, error) {
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a byte count or max", s)
	}
	if n >= unlimitedV1 {
		return 0, nil
	}
	return int64(n), nil
}

// Limiter sets the Go memory limit for a server: the cgroup's limit at start, that less the
// model's native memory once it is loaded; nothing when GOMEMLIMIT is set or there is no cgroup
// limit. Each decision is logged.
type Limiter struct {
	cgroup Cgroup
	user   string // GOMEMLIMIT, when set
	log    *slog.Logger
}

// Start reads the cgroup limit under root and sets the Go memory limit to it (the model's native
// memory is not known yet), unless getenv("GOMEMLIMIT") is set; it logs what it did. A cgroup that
// cannot be read is a warning, and no limit is set.
func Start(getenv func(string) string, root string, log *slog.Logger) *Limiter {
	l := &Limiter{user: getenv("GOMEMLIMIT"), log: log}
	if l.user != "" {
		log.Info("Go memory limit left to GOMEMLIMIT", "GOMEMLIMIT", l.user, "limit_bytes", debug.SetMemoryLimit(-1))
		return l
	}
	cg, err := ReadCgroup(root)
	switch {
	case err != nil:
		log.Warn("Go memory limit not set: the cgroup memory limit cannot be read", "err", err)
	case cg.Limit == 0:
		log.Info("Go memory limit not set: no cgroup memory limit")
	default:
		l.cgroup = cg
		debug.SetMemoryLimit(cg.Limit)
		log.Info("Go memory limit set from the cgroup until the model is loaded", "limit_bytes", cg.Limit, "cgroup_file", cg.File)
	}
	return l
}

// ModelLoaded lowers the Go memory limit to the cgroup's limit less native, the bytes the model's
// program holds outside the Go heap (at least MinGoLimit, with a warning when it had to be raised).
func (l *Limiter) ModelLoaded(native int64) {
	if l.user != "" || l.cgroup.Limit == 0 {
		return
	}
	limit := l.cgroup.Limit - native
	if limit < MinGoLimit {
		l.log.Warn("the model's native memory leaves the Go heap almost nothing of the cgroup limit: the server will likely run out of memory",
			"cgroup_limit_bytes", l.cgroup.Limit, "native_bytes", native, "go_limit_bytes", MinGoLimit)
		limit = MinGoLimit
	}
	debug.SetMemoryLimit(limit)
	l.log.Info("Go memory limit set: the cgroup limit less the model's native memory", "limit_bytes", limit,
		"cgroup_limit_bytes", l.cgroup.Limit, "native_bytes", native, "cgroup_file", l.cgroup.File)
}

// Describe says in a line what Start would do, for --verify.
func Describe(getenv func(string) string, root string) string {
	if v := getenv("GOMEMLIMIT"); v != "" {
		return "GOMEMLIMIT=" + v + " (left as set)"
	}
	cg, err := ReadCgroup(root)
	switch {
	case err != nil:
		return "not set (" + err.Error() + ")"
	case cg.Limit == 0:
		return "not set (no cgroup memory limit)"
	}
	return fmt.Sprintf("the cgroup limit %d bytes (%s) less the model's native memory once loaded", cg.Limit, cg.File)
}
