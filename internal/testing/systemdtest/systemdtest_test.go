package systemdtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// The booted container runs systemd as PID 1, a user manager for TestUser,
// and journald; commands report their exit codes.
func TestBoot(t *testing.T) {
	h := Boot(t)
	ctx := context.Background()
	if comm := strings.TrimSpace(h.Must(t, "cat", "/proc/1/comm")); comm != "systemd" {
		t.Errorf("PID 1 is %q, want systemd", comm)
	}
	r, err := h.RunUser(ctx, "systemctl", "--user", "is-system-running", "--wait")
	if err != nil || strings.TrimSpace(r.Stdout) != "running" {
		t.Errorf("user manager of %s: %q %q, %v", TestUser, r.Stdout, r.Stderr, err)
	}
	if who := strings.TrimSpace(mustUser(t, h, "id", "-u")); who != fmt.Sprint(TestUserUID) {
		t.Errorf("RunUser runs as uid %s, want %d", who, TestUserUID)
	}
	h.Must(t, "systemd-run", "--wait", "--unit", "hello", "echo", "hello from a unit")
	if j := h.Must(t, "journalctl", "-u", "hello", "--no-pager"); !strings.Contains(j, "hello from a unit") {
		t.Errorf("journal of hello.service lacks its line:\n%s", j)
	}
	if r, err := h.Run(ctx, "sh", "-c", "exit 7"); err != nil || r.Code != 7 {
		t.Errorf("exit code %d, %v; want 7", r.Code, err)
	}
}

func mustUser(t *testing.T, h *Host, argv ...string) string {
	t.Helper()
	r, err := h.RunUser(context.Background(), argv...)
	if err != nil || r.Code != 0 {
		t.Fatalf("%q as %s: exit %d, %v: %s", argv, TestUser, r.Code, err, r.Stderr)
	}
	return r.Stdout
}

func TestCgroupMounts(t *testing.T) {
	got, err := cgroupMounts("testdata/mountinfo-v1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/memory"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("cgroupMounts = %q, want %q", got, want)
	}
}
