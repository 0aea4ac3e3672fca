package builder

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/internal/pybase"
	"github.com/ttmodel/tt-model/internal/testenv"
	"github.com/ttmodel/tt-model/manifest"
)

// TestKindHTTPServerDaemonless packages the echo server (kind http-server,
// nothing to install) on the Python test base given as an OCI layout: it is
// assembled without a daemon, verified in a container, carries upstream's
// image config, and the same inputs give the same digest.
func TestKindHTTPServerDaemonless(t *testing.T) {
	testenv.Require(t, "docker")
	base := pybase.Get(t)
	m, work := kindPackage(t, "echo", base.Layout)
	res := mustPackage(t, kindOpts(t, m, work, VerifyDocker))
	t.Cleanup(func() { removeImage(t, res.Image) })
	if res.BuiltWith != builtDaemonless || res.VerifiedIn != (dockerRunner{}).Where() || res.Kind != "http-server" {
		t.Errorf("built %q, verified in %q, kind %q", res.BuiltWith, res.VerifiedIn, res.Kind)
	}
	img, err := readLayoutImage(filepath.Join(res.Dir, "image"), res.Image)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	wantEP := []string{toolImagePath, "supervise", "--ready-line", `"event": "ready"`, "--"}
	if !slices.Equal(c.Entrypoint, wantEP) || !slices.Equal(c.Cmd, []string{"/usr/local/bin/serve-default.sh"}) {
		t.Errorf("entrypoint %q cmd %q", c.Entrypoint, c.Cmd)
	}
	if c.User != "1000:1000" || c.WorkingDir != codeImageDir {
		t.Errorf("user %q workdir %q", c.User, c.WorkingDir)
	}
	for _, kv := range []string{"PYTHONPATH=/opt/tt-metal", "TT_MODEL_KIND=http-server", "HF_HOME=/hf", "LANG=C.UTF-8"} {
		if !slices.Contains(c.Env, kv) {
			t.Errorf("env %q lacks %s", c.Env, kv)
		}
	}
	if c.Labels["org.tenstorrent.tt-model.kind"] != "http-server" || c.Labels["org.tenstorrent.tt-model"] != "kinds-echo" {
		t.Errorf("labels %v", c.Labels)
	}
	for _, p := range []string{"code/models/echo/server.py", "README.md", manifest.WireFile, "image/oci-layout"} {
		if _, err := os.Stat(filepath.Join(res.Dir, p)); err != nil {
			t.Errorf("package lacks %s", p)
		}
	}
	w, err := manifest.ReadWire(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Container.Built["built_with"]; got != builtDaemonless {
		t.Errorf("wire built_with %v", got)
	}

	m2, work2 := kindPackage(t, "echo", base.Layout)
	again := mustPackage(t, kindOpts(t, m2, work2, VerifyRootfs))
	if again.Digest != res.Digest {
		t.Errorf("same inputs, another copy: digest %s, then %s", res.Digest, again.Digest)
	}
	if again.VerifiedIn != (chrootRunner{}).Where() {
		t.Errorf("--verify-in rootfs verified in %q", again.VerifiedIn)
	}
}

func removeImage(t *testing.T, ref string) {
	e, err := connectDocker(context.Background())
	if err != nil {
		return
	}
	defer e.Close()
	if _, err := e.c.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true}); err != nil && !strings.Contains(err.Error(), "No such image") {
		t.Logf("cleanup: remove %s: %v", ref, err)
	}
}

// TestKindEngineBuild packages the echo server with a package to install
// (a wheel shipped in code/), so install_engine.sh runs: the Docker engine
// builds the Dockerfile through its API (BuildKit here) with no network,
// from the Python test base given as an OCI layout; verify imports what was
// installed; the exported image keeps the engine's config, so its config
// digest is the engine's image id.
func TestKindEngineBuild(t *testing.T) {
	testenv.Require(t, "docker")
	base := pybase.Get(t)
	m, work := kindPackage(t, "echo", base.Layout,
		"  ready_line: '\"event\": \"ready\"'\n", "  ready_line: '\"event\": \"ready\"'\n  packages: [/opt/tt-metal/models/echo/wheels/echo_greeting-1.0-py3-none-any.whl]\n",
		"  - \"import json, http.server\"\n", "  - \"import json, http.server\"\n  - \"import echo_greeting; assert echo_greeting.GREETING == 'from a wheel'\"\n")
	writeWheel(t, filepath.Join(work, "tree", "models", "echo", "wheels"), "echo_greeting", "1.0", "echo_greeting", "GREETING = 'from a wheel'\n")
	opts := kindOpts(t, m, work, VerifyDocker)
	opts.BuildNetwork = "none"
	opts.Context = filepath.Join(work, "context")
	res := mustPackage(t, opts)
	t.Cleanup(func() { removeImage(t, res.Image) })
	if !strings.HasPrefix(res.BuiltWith, builtThroughEngine) {
		t.Errorf("built %q, want through the engine", res.BuiltWith)
	}
	dockerfile, err := os.ReadFile(filepath.Join(opts.Context, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(dockerfile), "RUN bash /usr/local/share/tt-model/install_engine.sh") {
		t.Errorf("Dockerfile runs no install_engine.sh:\n%s", dockerfile)
	}
	img, err := readLayoutImage(filepath.Join(res.Dir, "image"), res.Image)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Image(img); err != nil {
		t.Errorf("the exported image does not validate: %v", err)
	}
	e, err := connectDocker(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	have, err := e.c.ImageInspect(context.Background(), res.Image)
	if err != nil {
		t.Fatal(err)
	}
	if have.ID != res.ConfigDigest {
		t.Errorf("engine id %s, package config digest %s: serve would load the image again", have.ID, res.ConfigDigest)
	}
}
