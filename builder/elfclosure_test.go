package builder

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/builder/oci"
)

func closurePaths(c oci.Closure) []string {
	var out []string
	for _, l := range c.Libraries {
		out = append(out, l.ImagePath)
	}
	return out
}

// TestELFClosureOfCgoBinary resolves the fixture on this machine as ld.so
// would: the loader from PT_INTERP, libc and libm, and the loader not a
// second time when libc asks for it by soname.
func TestELFClosureOfCgoBinary(t *testing.T) {
	bin := fixtureBin(t)
	s, err := oci.NewLibSearch("/")
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.ResolveELFClosure(filepath.Join(bin, "tt-model-server"), ImageServerPath)
	if err != nil {
		t.Fatal(err)
	}
	if c.Interpreter == nil || c.Interpreter.ImagePath != "/lib64/ld-linux-x86-64.so.2" {
		t.Fatalf("interpreter %+v, want /lib64/ld-linux-x86-64.so.2", c.Interpreter)
	}
	var names []string
	for _, l := range c.Libraries {
		names = append(names, filepath.Base(l.ImagePath))
	}
	if strings.Join(names, " ") != "libc.so.6 libm.so.6" {
		t.Errorf("libraries %v, want libc.so.6 libm.so.6 (and not the loader again)", closurePaths(c))
	}
	if c.Static() {
		t.Error("a cgo binary reported static")
	}
}

// TestELFClosureSearchOrder builds a fake root: a vendor directory named by
// an included ld.so.conf file, a non-ELF decoy, and an executable with
// RUNPATH $ORIGIN/../lib, and checks each rule of the search.
func TestELFClosureSearchOrder(t *testing.T) {
	real, err := oci.NewLibSearch("/")
	if err != nil {
		t.Fatal(err)
	}
	bin := fixtureBin(t)
	host, err := real.ResolveELFClosure(filepath.Join(bin, "tt-model-server"), ImageServerPath)
	if err != nil {
		t.Fatal(err)
	}
	hostLib := map[string]string{}
	for _, l := range host.Libraries {
		hostLib[filepath.Base(l.ImagePath)] = l.HostPath
	}

	root := t.TempDir()
	exe := filepath.Join(root, "app", "bin", "server")
	if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", exe, `-ldflags=-extldflags "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../lib"`, "./testdata/miniserver")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the RUNPATH fixture: %v\n%s", err, out)
	}
	copyIn := func(src, dst string) {
		t.Helper()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		writeFiles(t, root, map[string]string{dst: string(b)})
	}
	copyIn(host.Interpreter.HostPath, "lib64/ld-linux-x86-64.so.2")
	copyIn(hostLib["libc.so.6"], "lib/x86_64-linux-gnu/libc.so.6")
	copyIn(hostLib["libm.so.6"], "opt/vendor/lib/libm.so.6")
	writeFiles(t, root, map[string]string{
		"etc/ld.so.conf":             "# the usual shape\ninclude /etc/ld.so.conf.d/*.conf\n",
		"etc/ld.so.conf.d/v.conf":    "/opt/vendor/lib\n",
		"opt/vendor/lib/libc.so.6":   "not an ELF file: the loader passes it by\n",
		"etc/ld.so.conf.d/README.md": "not a .conf file\n",
	})

	s, err := oci.NewLibSearch(root)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.ConfDirs(), []string{"/opt/vendor/lib"}) {
		t.Errorf("ld.so.conf dirs %v, want [/opt/vendor/lib]", s.ConfDirs())
	}
	c, err := s.ResolveELFClosure(exe, ImageServerPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := closurePaths(c); !reflect.DeepEqual(got, []string{"/lib/x86_64-linux-gnu/libc.so.6", "/opt/vendor/lib/libm.so.6"}) {
		t.Errorf("libraries %v, want libc from the default dir (decoy skipped) and libm from ld.so.conf", got)
	}
	if got := c.ExtraLibraryPath(); !reflect.DeepEqual(got, []string{"/opt/vendor/lib"}) {
		t.Errorf("LD_LIBRARY_PATH dirs %v, want [/opt/vendor/lib]: an image has no ld.so.cache", got)
	}

	// RUNPATH beats ld.so.conf, and $ORIGIN keeps its place relative to the
	// binary's image path.
	copyIn(hostLib["libm.so.6"], "app/lib/libm.so.6")
	c, err = s.ResolveELFClosure(exe, ImageServerPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := closurePaths(c); !reflect.DeepEqual(got, []string{"/lib/x86_64-linux-gnu/libc.so.6", "/usr/local/lib/libm.so.6"}) {
		t.Errorf("libraries %v, want libm through $ORIGIN/../lib at /usr/local/lib", got)
	}
	if len(c.ExtraLibraryPath()) != 0 {
		t.Errorf("LD_LIBRARY_PATH dirs %v, want none", c.ExtraLibraryPath())
	}

	if err := os.Remove(filepath.Join(root, "lib/x86_64-linux-gnu/libc.so.6")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResolveELFClosure(exe, ImageServerPath); err == nil || !strings.Contains(err.Error(), "needs libc.so.6, which the loader would not find") {
		t.Errorf("missing libc: %v", err)
	}
}

func TestELFClosureOfStaticBinary(t *testing.T) {
	// A pure-Go program is static with CGO_ENABLED=0.
	pure := filepath.Join(t.TempDir(), "pure")
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", pure, "./testdata/purego")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build purego: %v\n%s", err, b)
	}
	s, err := oci.NewLibSearch("/")
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.ResolveELFClosure(pure, ImageToolPath)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Static() {
		t.Errorf("a CGO_ENABLED=0 binary has closure %+v", c)
	}
}
