// Package pybase gives tests the Python test base: a minimal Debian
// bookworm with python3, FastAPI, uvicorn and pip, the base the tests of the
// Python package kinds build on. scripts/python-base-rootfs.sh makes its
// root file system with debootstrap from Debian's mirror (no registry);
// this package turns it into an OCI image and loads it into the Docker
// engine. Each step is cached between runs, keyed on the script's content:
// the first run pays debootstrap (minutes), later ones take seconds.
package pybase

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/internal/engine"
	"github.com/ttmodel/tt-model/internal/ocilayout"
	"github.com/ttmodel/tt-model/internal/testing/imagetest"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
)

// Base is the Python test base.
type Base struct {
	// Layout is an OCI layout holding the image.
	Layout string
	// Digest is its manifest digest.
	Digest string
	// Key is the first 12 hex digits of the script's sha256.
	Key string
}

// EngineTag is the base's name in the Docker engine.
func (b Base) EngineTag() string { return "tt-model-test/kinds-python-base:" + b.Key }

// Get returns the base as an OCI layout, building what the cache lacks. A
// missing tarball needs debootstrap and root: without them the test skips
// (or fails when TT_REQUIRE names debootstrap).
func Get(t testing.TB) Base {
	t.Helper()
	script := scriptPath(t)
	b, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	key := hex.EncodeToString(sum[:])[:12]
	cache, err := cacheDir()
	if err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(cache, "python-base-"+key+".tar")
	if _, err := os.Stat(rootfs); err != nil {
		testenv.Require(t, "debootstrap")
		if os.Geteuid() != 0 {
			testenv.Missing(t, "debootstrap", fmt.Errorf("the Python test base is not cached yet, and debootstrap needs root"))
		}
		t.Logf("building the Python test base with debootstrap (minutes, once): %s", script)
		cmd := exec.Command(script, cache)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		if got := strings.TrimSpace(lastLine(string(out))); got != rootfs {
			t.Fatalf("%s wrote %q, want %q", script, got, rootfs)
		}
	}
	dir := filepath.Join(cache, "python-base-"+key+".oci")
	unlock := lock(t, filepath.Join(cache, "python-base-oci.lock"))
	defer unlock()
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		if err := writeLayout(rootfs, dir); err != nil {
			t.Fatalf("Python test base: %v", err)
		}
	}
	img, err := ocilayout.Image(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return Base{Layout: dir, Digest: d.String(), Key: key}
}

// InEngine loads the base into the engine under EngineTag unless it is
// there already, and returns the tag. The image is left in the engine for
// the next run.
func (b Base) InEngine(t testing.TB, c *client.Client) string {
	t.Helper()
	ctx := context.Background()
	tag := b.EngineTag()
	img, err := ocilayout.Image(b.Layout, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	have, err := c.ImageInspect(ctx, tag)
	switch {
	case err == nil && have.ID == cfg.String():
		return tag
	case err != nil && !cerrdefs.IsNotFound(err):
		t.Fatalf("inspect %s: %v", tag, err)
	}
	cache, err := cacheDir()
	if err != nil {
		t.Fatal(err)
	}
	unlock := lock(t, filepath.Join(cache, "python-base-engine.lock"))
	defer unlock()
	if have, err := c.ImageInspect(ctx, tag); err == nil && have.ID == cfg.String() {
		return tag // another test binary loaded it while this one waited
	}
	if err := engine.Load(ctx, c, tag, img); err != nil {
		t.Fatalf("load the Python test base: %v", err)
	}
	return tag
}

// writeLayout makes the image: the rootfs as one layer, the config of a
// Debian image (PATH, a UTF-8 locale, bash), written to dir atomically.
func writeLayout(rootfs, dir string) error {
	layer, err := tarball.LayerFromFile(rootfs, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{CreatedBy: "scripts/python-base-rootfs.sh"}})
	if err != nil {
		return err
	}
	img, err = imagetest.Linux(img, func(cf *v1.ConfigFile) {
		cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
		cf.Config.Cmd = []string{"/bin/bash"}
		cf.Config.Labels = map[string]string{"org.opencontainers.image.description": "Python test base of tt-model (Debian bookworm, debootstrap)"}
	})
	if err != nil {
		return err
	}
	if img, err = mutate.CreatedAt(img, v1.Time{Time: time.Unix(0, 0).UTC()}); err != nil {
		return err
	}
	return ocilayout.WriteAtomic(dir, img)
}

func scriptPath(t testing.TB) string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "..", "scripts", "python-base-rootfs.sh")
}

// cacheDir is where the script caches by default.
func cacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir = filepath.Join(dir, "tt-model-test")
	return dir, os.MkdirAll(dir, 0o755)
}

// lock takes an exclusive lock on path: test binaries of several packages
// run at once and share the cache.
func lock(t testing.TB, path string) func() {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	return func() { f.Close() }
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
