package memlimit

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// Each testdata folder is the /proc and /sys/fs/cgroup a process sees in one kind of host or
// container.
func TestReadCgroup(t *testing.T) {
	cases := []struct {
		tree      string
		wantLimit int64
		wantFile  string
		wantErr   string
	}{
		{tree: "v2-container", wantLimit: 1 << 30, wantFile: "/sys/fs/cgroup/memory.max"},
		{tree: "v2-no-limit"},
		{tree: "v2-parent-lower", wantLimit: 512 << 20, wantFile: "/sys/fs/cgroup/user.slice/memory.max"},
		{tree: "v2-leaf-lower", wantLimit: 256 << 20, wantFile: "/sys/fs/cgroup/user.slice/app.service/memory.max"},
		{tree: "v2-bad-value", wantErr: `/sys/fs/cgroup/memory.max: "lots" is not a byte count or max`},
		// Docker on cgroup v1: the container's cgroup is the root of the mount it sees.
		{tree: "v1-docker", wantLimit: 700 << 20, wantFile: "/sys/fs/cgroup/memory/memory.limit_in_bytes"},
		{tree: "v1-unlimited"},
		// A v2 hierarchy without the memory controller, beside v1's memory hierarchy.
		{tree: "hybrid", wantLimit: 2 << 30, wantFile: "/sys/fs/cgroup/memory/process_api/c8625/memory.limit_in_bytes"},
		{tree: "none"},
		{tree: "missing", wantErr: "proc/self/cgroup: no such file or directory"},
	}
	for _, c := range cases {
		t.Run(c.tree, func(t *testing.T) {
			cg, err := ReadCgroup(filepath.Join("testdata", c.tree))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cg.Limit != c.wantLimit || cg.File != c.wantFile {
				t.Errorf("limit %d from %q, want %d from %q", cg.Limit, cg.File, c.wantLimit, c.wantFile)
			}
		})
	}
}

// The Limiter sets the runtime's limit: the cgroup's at start, less the native memory once the
// model is loaded (never under MinGoLimit); GOMEMLIMIT or no cgroup limit leaves it alone.
func TestLimiter(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	const untouched = 12345 << 20
	cases := []struct {
		name               string
		tree, gomemlimit   string
		native             int64
		atStart, afterLoad int64
		log                string
	}{
		{"cgroup less native", "v2-container", "", 300 << 20, 1 << 30, 1<<30 - 300<<20, "the cgroup limit less the model's native memory"},
		{"native over the cgroup", "v1-docker", "", 690 << 20, 700 << 20, MinGoLimit, "will likely run out of memory"},
		{"GOMEMLIMIT set", "v2-container", "2GiB", 300 << 20, untouched, untouched, "left to GOMEMLIMIT"},
		{"no cgroup limit", "v2-no-limit", "", 300 << 20, untouched, untouched, "no cgroup memory limit"},
		{"unreadable cgroup", "v2-bad-value", "", 300 << 20, untouched, untouched, "cannot be read"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			debug.SetMemoryLimit(untouched)
			var logs bytes.Buffer
			l := Start(func(k string) string {
				if k == "GOMEMLIMIT" {
					return c.gomemlimit
				}
				return ""
			}, filepath.Join("testdata", c.tree), slog.New(slog.NewTextHandler(&logs, nil)))
			if got := debug.SetMemoryLimit(-1); got != c.atStart {
				t.Errorf("at start the limit is %d, want %d", got, c.atStart)
			}
			l.ModelLoaded(c.native)
			if got := debug.SetMemoryLimit(-1); got != c.afterLoad {
				t.Errorf("once loaded the limit is %d, want %d", got, c.afterLoad)
			}
			if !strings.Contains(logs.String(), c.log) {
				t.Errorf("the log does not say %q:\n%s", c.log, logs.String())
			}
		})
	}
}
