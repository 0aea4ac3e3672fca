package commands

import (
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/internal/testing/testenv"

	"github.com/spf13/pflag"

	"github.com/ttmodel/tt-model/manifest"

	"github.com/ttmodel/tt-model/internal/version"
)

// wireFixture packages manifest/testdata/good/tt-go-server.yaml into a
// tt_kernel_manifest.json the way `package` publishes it.
func wireFixture(t *testing.T) string {
	t.Helper()
	m, err := manifest.Load("../manifest/testdata/good/tt-go-server.yaml", manifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "build", m.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, manifest.WireFile)
	if err := m.ToWire(manifest.WireInfo{ImageTag: "test", ToolVersion: version.Version}).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSuperviseConfigFromManifest(t *testing.T) {
	wire := wireFixture(t)
	var f superviseFlags
	fs := pflag.NewFlagSet("supervise", pflag.ContinueOnError)
	f.bind(fs)
	if err := fs.Parse([]string{"--manifest", wire, "--profile", "fast", "--chips", "0-1", "--start-timeout", "9m"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.config(fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Argv) == 0 || filepath.Base(cfg.Argv[0]) != "tt-model-server" || !slices.Contains(cfg.Argv, "8000") {
		t.Errorf("argv %q: want tt-model-server on port 8000", cfg.Argv)
	}
	if cfg.Env["HF_MODEL"] != "Roboflow/rf-detr-base" || cfg.Env["RFDETR_PRECISION"] != "bf16" {
		t.Errorf("env %v: want HF_MODEL and the fast profile's env", cfg.Env)
	}
	if cfg.ReadyURL != "http://127.0.0.1:8000/health" || cfg.ReadyLine != "" {
		t.Errorf("ready url %q line %q", cfg.ReadyURL, cfg.ReadyLine)
	}
	if !slices.Equal(cfg.Chips, []int{0, 1}) || cfg.StartTimeout.Minutes() != 9 {
		t.Errorf("chips %v start timeout %s", cfg.Chips, cfg.StartTimeout)
	}
}

func TestSuperviseUsageErrors(t *testing.T) {
	wire := wireFixture(t)
	for _, args := range [][]string{
		{"supervise"}, // no server
		{"supervise", "--manifest", wire, "--", "ls"}, // both
		{"supervise", "--profile", "fast", "--", "ls"},
		{"supervise", "--manifest", wire, "--profile", "nope"},
		{"supervise", "--chips", "a", "--", "ls"},
		{"supervise", "--reset-on-start", "sometimes", "--", "ls"},
		{"supervise", "--ready-url", "ftp://x", "--", "ls"},
	} {
		if code, _, stderr := run(t, args...); code != 2 || stderr == "" {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a message", args, code, stderr)
		}
	}
}

// `service install --user --print --manifest …` prints a unit that
// systemd-analyze verify accepts.
func TestServiceInstallPrintVerifies(t *testing.T) {
	wire := wireFixture(t)
	t.Setenv("PI05_HANG_MARKER", "/var/lib/pi05/hang marker")
	bin := filepath.Join(t.TempDir(), "tt bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "tt-model-server"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir() // on the installer's PATH, but holds none of the unit's programs
	prefix := filepath.Join(t.TempDir(), "detector")
	t.Setenv("PATH", other+":relative/bin:"+bin+":"+os.Getenv("PATH"))
	t.Setenv("HF_HOME", "/srv/hf")
	t.Setenv("HF_HUB_CACHE", "")
	code, out, stderr := run(t, "service", "install", "--user", "--print", "--manifest", wire, "--profile", "fast", "--start-timeout", "8m", "--prefix", prefix)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	self, _ := os.Executable()
	self, _ = filepath.EvalSymlinks(self)
	if strings.Contains(out, "relative/bin") || strings.Contains(out, other) || strings.Contains(out, bin) || strings.Contains(out, self) || strings.Contains(out, wire) {
		t.Errorf("a PATH entry that finds none of the unit's programs reached the unit:\n%s", out)
	}
	for _, want := range []string{
		"Description=tt-model server detector (profile fast)\n",
		// The hang marker the installer's environment chose is pinned.
		// The copies under the prefix, never the build tree's files.
		"ExecStart=" + prefix + "/bin/tt-model supervise --manifest " + prefix + "/" + manifest.WireFile + ` --profile fast --start-timeout 8m0s --hang-marker "/var/lib/pi05/hang marker"` + "\n",
		// The prefix's bin (tt-model-server), then the system's; the cache that HF_HOME names.
		"Environment=PATH=" + prefix + "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n", "Environment=HF_HOME=/srv/hf\n", "Environment=HF_HUB_CACHE=/srv/hf/hub\n",
		"TimeoutStartSec=1500s\n", "Type=notify\n", "WantedBy=default.target\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("unit lacks %q:\n%s", want, out)
		}
	}
	testenv.Require(t, "systemd-analyze")
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal(err)
	}
	// verify checks that ExecStart's program is there: install would have copied it.
	if err := copyPrefix(prefix, "tt-model-detector", []prefixCopy{{self, filepath.Join(prefix, "bin", "tt-model")}}); err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "tt-model-detector.service")
	if err := os.WriteFile(unit, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", "--man=no", "--user", unit)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	if vout, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(vout)) != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, vout)
	}
}

// Units of two models keep their own hang markers: a system unit's in its
// state folder, a user unit's in ~/.local/state, never pi0.5's
// ~/.cache/pi05/hang_marker; the system unit's sandbox leaves the marker's
// folder, the caches and the chip locks writable.
func TestServiceInstallOwnHangMarker(t *testing.T) {
	wire := wireFixture(t)
	t.Setenv("PI05_HANG_MARKER", "")
	t.Setenv("HF_HOME", "/root/.cache/huggingface")
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("XDG_STATE_HOME", "/home/ops/.local/state")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--name", "tt-model-a"}, []string{
			" --hang-marker /var/lib/tt-model-a/hang_marker\n",
			"StateDirectory=tt-model-a\n", "ProtectSystem=strict\n", "ProtectHome=read-only\n",
			"ReadWritePaths=-/root/.cache/huggingface\n",
		}},
		{[]string{"--name", "tt-model-b"}, []string{" --hang-marker /var/lib/tt-model-b/hang_marker\n"}},
		{[]string{"--name", "tt-model-c", "--user"}, []string{" --hang-marker /home/ops/.local/state/tt-model-c/hang_marker\n"}},
	} {
		code, out, stderr := run(t, append([]string{"service", "install", "--print", "--manifest", wire}, tc.args...)...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", tc.args, code, stderr)
		}
		if strings.Contains(out, "pi05") {
			t.Errorf("%q: the unit names pi0.5's marker:\n%s", tc.args, out)
		}
		for _, want := range tc.want {
			if !strings.Contains(out, want) {
				t.Errorf("%q: unit lacks %q:\n%s", tc.args, want, out)
			}
		}
	}
}

// The ARGV form pins the server program's absolute path and the readiness
// URL that $PORT chose, and names the unit after the program.
func TestServiceInstallPrintArgv(t *testing.T) {
	t.Setenv("PORT", "9123")
	code, out, stderr := run(t, "service", "install", "--print", "--", "sh", "-c", "exec server --port 8000")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	sh, _ := exec.LookPath("sh")
	sh, _ = filepath.Abs(sh)
	if !strings.Contains(out, " --ready-url http://127.0.0.1:9123/health -- "+sh+` -c "exec server --port 8000"`+"\n") {
		t.Errorf("ExecStart does not run %s:\n%s", sh, out)
	}
	if !strings.Contains(out, "# tt-model-sh.service") || !strings.Contains(out, "WantedBy=multi-user.target") {
		t.Errorf("unit name or target wrong:\n%s", out)
	}
}

// The supervisor takes the hang marker and PI05_RESET_ON_START (auto, 1, 0) from the server's
// environment: a --manifest profile's, else its own; the flags win.
func TestSuperviseReadsServerHangSettings(t *testing.T) {
	path := pi05Wire(t, nil)
	config := func(args ...string) (supervisorConfig, error) {
		var f superviseFlags
		fs := pflag.NewFlagSet("supervise", pflag.ContinueOnError)
		f.bind(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		c, err := f.config(fs, fs.Args())
		return supervisorConfig{string(c.ResetOnStart), c.HangMarker}, err
	}
	if c, err := config("--manifest", path); err != nil || c != (supervisorConfig{"auto", "/cache/pi05_hang_marker"}) {
		t.Errorf("pi05 manifest: %+v, %v; want the profile's auto and /cache/pi05_hang_marker", c, err)
	}
	t.Setenv("PI05_RESET_ON_START", "1")
	t.Setenv("PI05_HANG_MARKER", "/state/marker")
	if c, err := config("--", "server"); err != nil || c != (supervisorConfig{"always", "/state/marker"}) {
		t.Errorf("PI05_RESET_ON_START=1 in the environment: %+v, %v", c, err)
	}
	if c, err := config("--reset-on-start", "0", "--hang-marker", "/m", "--", "server"); err != nil || c != (supervisorConfig{"never", "/m"}) {
		t.Errorf("flags over the environment: %+v, %v", c, err)
	}
	t.Setenv("PI05_RESET_ON_START", "sometimes")
	if _, err := config("--", "server"); err == nil || !strings.Contains(err.Error(), "PI05_RESET_ON_START") {
		t.Errorf("PI05_RESET_ON_START=sometimes: %v, want an error naming it", err)
	}
}

type supervisorConfig struct{ reset, marker string }

// A server program that does not exist or cannot run is refused at install,
// not found by systemd at each start.
func TestServiceInstallRefusesMissingServer(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "server")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, server := range []string{"/nonexistent/tt-model-server", notExec, t.TempDir()} {
		code, _, stderr := run(t, "service", "install", "--print", "--", server, "--port", "8000")
		if code != 2 || !strings.Contains(stderr, server+": not an executable file") {
			t.Errorf("%s: exit %d, stderr %q", server, code, stderr)
		}
	}
}

// --api-key-file reaches a system unit as a credential, by its absolute
// path; the key itself is nowhere in the unit, and a missing or empty file
// is refused at install.
func TestServiceInstallAPIKeyFile(t *testing.T) {
	wire := wireFixture(t)
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("api-key", []byte("the-key-itself\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, "service", "install", "--print", "--manifest", wire, "--api-key-file", "api-key")
	key := filepath.Join(dir, "api-key")
	if code != 0 || !strings.Contains(out, "LoadCredential=tt-api-key:"+key+"\nEnvironment=TT_API_KEY_FILE=%d/tt-api-key\n") ||
		strings.Contains(out, "the-key-itself") || strings.Contains(out, "--api-key-file") {
		t.Errorf("exit %d: %s\n%s", code, stderr, out)
	}
	if err := os.WriteFile("empty", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"missing", "empty"} {
		if code, _, stderr := run(t, "service", "install", "--print", "--manifest", wire, "--api-key-file", bad); code != 2 || !strings.Contains(stderr, "--api-key-file") {
			t.Errorf("--api-key-file %s: exit %d, %s", bad, code, stderr)
		}
	}
}

// --run-as makes a system unit's User= and Group=; a user unit refuses it.
func TestServiceInstallRunAs(t *testing.T) {
	wire := wireFixture(t)
	code, out, stderr := run(t, "service", "install", "--print", "--manifest", wire, "--run-as", "nobody:nogroup")
	if code != 0 || !strings.Contains(out, "\nUser=nobody\nGroup=nogroup\n") {
		t.Errorf("exit %d: %s\n%s", code, stderr, out)
	}
	for _, args := range [][]string{{"--user", "--run-as", "nobody"}, {"--run-as", ":nogroup"}, {"--run-as", "no body"}} {
		if code, _, stderr := run(t, append([]string{"service", "install", "--print", "--manifest", wire}, args...)...); code != 2 || !strings.Contains(stderr, "--run-as") && !strings.Contains(stderr, "user or group") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a message", args, code, stderr)
		}
	}
}

// The service user must reach and write each writable path: a folder
// behind a home it cannot pass through, or one it does not own, is named.
func TestWritableBy(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{root, filepath.Dir(root)} { // t.TempDir's folders are 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	closed := mk("home", 0o700)
	behind := filepath.Join(closed, "cache")
	if err := os.Mkdir(behind, 0o777); err != nil {
		t.Fatal(err)
	}
	open, shared, mine := mk("open", 0o777), mk("shared", 0o775), mk("mine", 0o755)
	if err := os.Chown(shared, 0, 65534); err != nil {
		testenv.Skip(t, "chown needs root: "+err.Error())
	}
	if err := os.Chown(mine, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, uid string
		gids      []string
		want      string // "" ok, else a part of the error
	}{
		{open, "65534", nil, ""},
		{shared, "65534", []string{"65534"}, ""},
		{shared, "65534", []string{"100"}, "not writable"},
		{mine, "65534", nil, ""},
		{mine, "1000", nil, "not writable"},
		{behind, "65534", nil, "cannot pass through " + closed},
		{behind, "0", nil, ""},
		{filepath.Join(root, "missing"), "65534", nil, ""},
	} {
		err := writableBy(tc.path, tc.uid, tc.gids)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s as %s %v: %v, want %q", tc.path, tc.uid, tc.gids, err, tc.want)
		}
	}
}

// deviceGroup is the group of the chips' device files, none when root's or
// when there are no chips.
func TestDeviceGroup(t *testing.T) {
	dir := t.TempDir()
	if g, err := deviceGroup(filepath.Join(dir, "absent")); g != "" || err != nil {
		t.Errorf("no device folder: %q, %v", g, err)
	}
	dev := filepath.Join(dir, "0")
	if err := os.WriteFile(dev, nil, 0o660); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		if g, err := deviceGroup(dir); g != "" || err != nil {
			t.Errorf("root's device: %q, %v", g, err)
		}
	}
	if err := os.Chown(dev, -1, 65534); err != nil {
		testenv.Skip(t, "chown needs root: "+err.Error())
	}
	want, err := user.LookupGroupId("65534")
	if err != nil {
		t.Fatal(err)
	}
	if g, err := deviceGroup(dir); g != want.Name || err != nil {
		t.Errorf("device of group 65534: %q, %v; want %q", g, err, want.Name)
	}
}

// Install copies tt-model, tt-model-server and the manifest under the
// prefix and marks it the unit's; uninstall removes only a prefix marked
// for that unit.
func TestPrefixCopies(t *testing.T) {
	src := t.TempDir()
	for _, f := range []string{"tt-model", "tt-model-server", "tt_kernel_manifest.json"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte(f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	prefix := filepath.Join(t.TempDir(), "lib", "tt-model-x")
	argv, copies, left := prefixCopies(prefix, []string{filepath.Join(src, "tt-model"), "supervise", "--manifest", filepath.Join(src, "tt_kernel_manifest.json"), "--hang-marker", "/m"},
		[]string{"tt-model-server", "tt-smi"}, func(string) string { return "relative:" + src })
	if want := []string{prefix + "/bin/tt-model", "supervise", "--manifest", prefix + "/tt_kernel_manifest.json", "--hang-marker", "/m"}; !slices.Equal(argv, want) {
		t.Errorf("ExecStart %q, want %q", argv, want)
	}
	if !slices.Equal(left, []string{"tt-smi"}) {
		t.Errorf("programs left to PATH: %q", left)
	}
	if err := copyPrefix(prefix, "tt-model-x", copies); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"bin/tt-model", "bin/tt-model-server", "tt_kernel_manifest.json"} {
		if b, err := os.ReadFile(filepath.Join(prefix, f)); err != nil || string(b) != filepath.Base(f) {
			t.Errorf("%s: %q, %v", f, b, err)
		}
	}
	if removed, err := removePrefix(prefix, "tt-model-y"); removed || err == nil || !strings.Contains(err.Error(), "tt-model-x") {
		t.Errorf("another unit's uninstall: removed %v, %v", removed, err)
	}
	if removed, err := removePrefix(prefix, "tt-model-x"); !removed || err != nil {
		t.Errorf("the unit's uninstall: removed %v, %v", removed, err)
	}
	if _, err := os.Stat(prefix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the prefix is still there: %v", err)
	}
	if removed, err := removePrefix(src, "tt-model-x"); removed || err != nil {
		t.Errorf("a folder with no owner file: removed %v, %v", removed, err)
	}
}
