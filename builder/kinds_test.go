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

	"github.com/ttmodel/tt-model/builder/kind"
	"github.com/ttmodel/tt-model/internal/ocilayout"
	"github.com/ttmodel/tt-model/internal/testing/pybase"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
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
	removeImagesOf(t, m.Name)
	res := mustPackage(t, kindOpts(t, m, work, VerifyDocker))
	if res.BuiltWith != builtDaemonless || res.VerifiedIn != (dockerRunner{}).Where() || res.Kind != "http-server" {
		t.Errorf("built %q, verified in %q, kind %q", res.BuiltWith, res.VerifiedIn, res.Kind)
	}
	img, err := ocilayout.Image(filepath.Join(res.Dir, "image"), res.Image)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	wantEP := []string{ImageToolPath, "supervise", "--ready-line", `"event": "ready"`, "--"}
	if !slices.Equal(c.Entrypoint, wantEP) || !slices.Equal(c.Cmd, []string{"/usr/local/bin/serve-default.sh"}) {
		t.Errorf("entrypoint %q cmd %q", c.Entrypoint, c.Cmd)
	}
	if c.User != "1000:1000" || c.WorkingDir != kind.CodeDir {
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
	// The image's own command, run the way a bare `docker run` runs it on a
	// host without chips, refuses with the flags it needs.
	e, err := connectDocker(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var out strings.Builder
	code, err := e.run(context.Background(), res.Image, []string{"/usr/local/bin/serve-default.sh"}, nil, &out)
	if err != nil || code != 1 || !strings.Contains(out.String(), "started without /dev/tenstorrent") || !strings.Contains(out.String(), "TT_MODEL_NO_CHIPS=1") {
		t.Errorf("serve-default.sh without chips: exit %d, %v:\n%s", code, err, out.String())
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

// removeImagesOf removes, when the test ends, every image the engine holds
// as tt-model/<name>: verify loads each built image, failed ones included.
func removeImagesOf(t *testing.T, name string) {
	t.Cleanup(func() {
		e, err := connectDocker(context.Background())
		if err != nil {
			return
		}
		defer e.Close()
		imgs, err := e.c.ImageList(context.Background(), client.ImageListOptions{Filters: make(client.Filters).Add("reference", "tt-model/"+name)})
		if err != nil {
			return
		}
		for _, img := range imgs.Items {
			for _, ref := range img.RepoTags {
				removeImage(t, ref)
			}
		}
	})
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
	img, err := ocilayout.Image(filepath.Join(res.Dir, "image"), res.Image)
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

// TestKindVllmBuildsStopAtTheEngine: both vLLM kinds build through the
// engine up to the step that needs what cannot be fetched here (vLLM from
// PyPI, the fork from GitHub; the build has no network), and fail there
// naming install_engine.sh's step, what it installs, and the tool's words.
// No vLLM is faked.
func TestKindVllmBuildsStopAtTheEngine(t *testing.T) {
	testenv.Require(t, "docker")
	base := pybase.Get(t)
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{"vllm-plugin", []string{
			"install_engine.sh step 1 of 3, vLLM 0.24.0 (vllm==0.24.0, built from source with VLLM_TARGET_DEVICE=empty) failed",
			"RUN bash /usr/local/share/tt-model/install_engine.sh", "vllm==0.24.0"}},
		{"vllm-fork", []string{
			"install_engine.sh step 1 of 4, the vLLM fork https://github.com/tenstorrent/vllm at bf98d556c0ffee0123456789abcdef0123456789 failed",
			"RUN bash /usr/local/share/tt-model/install_engine.sh", "git clone https://github.com/tenstorrent/vllm"}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			m, work := kindPackage(t, tc.dir, base.Layout)
			opts := kindOpts(t, m, work, VerifyDocker)
			opts.BuildNetwork = "none"
			_, err := Package(context.Background(), opts)
			if err == nil {
				t.Fatal("the build succeeded without vLLM's packages")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if entries, _ := os.ReadDir(opts.OutDir); len(entries) != 0 {
				t.Errorf("%s holds %d entries after a failed build", opts.OutDir, len(entries))
			}
		})
	}
}

// TestKindFailuresKeepPrevious: a broken verify statement, a missing
// source.code path, a base that does not exist and an engine that is down
// each fail with a message naming the cause, and leave the previous package
// and no partial folder behind. With the engine down a daemonless kind
// still builds (verified in the unpacked image); a kind that installs
// says it needs the engine.
func TestKindFailuresKeepPrevious(t *testing.T) {
	base := pybase.Get(t)
	m, work := kindPackage(t, "echo", base.Layout)
	removeImagesOf(t, m.Name)
	first := mustPackage(t, kindOpts(t, m, work, VerifyRootfs))
	readme, err := os.ReadFile(filepath.Join(first.Dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	deadEngine := "unix://" + filepath.Join(t.TempDir(), "no-engine.sock")
	for _, tc := range []struct {
		name  string
		edits []string
		prep  func(t *testing.T, opts *Options)
		want  []string
	}{
		{name: "broken verify statement", edits: []string{`"import json, http.server"`, `"import json, no_such_module"`},
			want: []string{`verify.sh step 4 of 4, verify[1] "import json, no_such_module" failed (exit 1)`, "ModuleNotFoundError: No module named 'no_such_module'"}},
		{name: "missing source.code path", prep: func(t *testing.T, opts *Options) {
			if err := os.RemoveAll(filepath.Join(opts.WorkDir, "tree", "models", "echo")); err != nil {
				t.Fatal(err)
			}
		}, want: []string{`source.code[0]: "models/echo" does not exist under`}},
		{name: "base path that does not exist", prep: func(t *testing.T, opts *Options) { opts.Base = "./no-such-base" },
			want: []string{`--base "./no-such-base": no such file or directory`}},
		{name: "base that no engine or registry has", prep: func(t *testing.T, opts *Options) { opts.Base = "127.0.0.1:1/no-such/base:1" },
			want: []string{`--base "127.0.0.1:1/no-such/base:1": not in the Docker engine, and pulling 127.0.0.1:1/no-such/base:1 failed`}},
		{name: "engine down, kind that installs", edits: []string{"  ready_line: '\"event\": \"ready\"'\n", "  ready_line: '\"event\": \"ready\"'\n  packages: [requests]\n"},
			prep: func(t *testing.T, opts *Options) { t.Setenv("DOCKER_HOST", deadEngine) },
			want: []string{"kind http-server runs install_engine.sh at build time (first: runtime.packages (requests)), which needs a Docker engine: docker engine not reachable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, work := kindPackage(t, "echo", base.Layout, tc.edits...)
			opts := kindOpts(t, m, work, VerifyAuto)
			opts.OutDir = filepath.Dir(first.Dir)
			if tc.prep != nil {
				tc.prep(t, &opts)
			}
			_, err := Package(context.Background(), opts)
			if err == nil {
				t.Fatal("Package succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if got, err := os.ReadFile(filepath.Join(first.Dir, "README.md")); err != nil || string(got) != string(readme) {
				t.Errorf("the previous package changed: %v", err)
			}
			if entries, _ := os.ReadDir(opts.OutDir); len(entries) != 1 {
				t.Errorf("%s holds %d entries, want only the previous package", opts.OutDir, len(entries))
			}
		})
	}

	t.Run("engine down, daemonless kind", func(t *testing.T) {
		t.Setenv("DOCKER_HOST", deadEngine)
		m, work := kindPackage(t, "echo", base.Layout)
		res := mustPackage(t, kindOpts(t, m, work, VerifyAuto))
		if res.BuiltWith != builtDaemonless || res.VerifiedIn != (chrootRunner{}).Where() || res.Digest != first.Digest {
			t.Errorf("built %q, verified in %q, digest %s (first %s)", res.BuiltWith, res.VerifiedIn, res.Digest, first.Digest)
		}
	})
}
