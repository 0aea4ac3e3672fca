package runnertest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/builtpkg"
	"github.com/ttmodel/tt-model/manifest"
)

// PI05GoldenTolerance is the largest |served - golden| accepted per action
// value against runner/testdata/pi05/request_golden.json: the server runs
// bf16 GEMMs with fp32 accumulation and the golden is PyTorch's bf16 run of
// the same request (the parity tests' tolerance, models/pi05
// TestPolicyMatchesReference).
const PI05GoldenTolerance = 2e-2

// PI05TestSLO are the manifest edits that give the multi-robot profile an SLO
// (p50 2 s, p99 2.2 s) a loaded 2-core test machine can keep with the tiny
// checkpoint: at the shipped 100 ms the server, rightly, refuses to start
// where no robot fits (a busy Zen 3 predicts 275-530 ms), and the tests are
// about what the profile does, not how fast this CPU is.
var PI05TestSLO = [2][2]string{
	{`PI05_SLO_MS: "100"`, `PI05_SLO_MS: "2000"`},
	{`PI05_SLO_P99_MS: "110"`, `PI05_SLO_P99_MS: "2200"`},
}

// PI05Pin is the weights revision models/pi05/tt-model.yaml pins.
const PI05Pin = "b211f3d44c36b6acfcf7ae94a64e8e96f75a64ba"

// PI05Package is a copy of models/pi05/tt-model.yaml, renamed, packaged by
// a tt-model binary through its CLI, and the environment that binary runs
// in: an HF cache of its own holding the tiny random checkpoint of the
// parity tests at the pinned revision, a tt-model cache of its own (run
// state, kernel cache) and no Hub, so no real server or cache is touched.
type PI05Package struct {
	Bin      string   // tt-model, with the tt-model-server it packaged beside it
	Name     string   // the package name
	Dir      string   // build/<Name>, the staged package
	HFHome   string   // the HF cache's HF_HOME
	Env      []string // the environment Bin runs in
	Wire     *manifest.Wire
	Profiles []string // every profile, the default first
}

// PackagePI05 runs `bin weights import` of the tiny checkpoint and `bin
// package` of a copy of root/models/pi05/tt-model.yaml named name, in the
// repository root (its source.extra_code root "." resolves there). The
// image the package step loads into the Docker engine (its verify) is the
// caller's to remove.
func PackagePI05(t testing.TB, root, bin, name string) *PI05Package {
	t.Helper()
	pin := "\n  revision: " + PI05Pin + "\n" // the revision the checkpoint below is stored as
	edits := append([][2]string{{"\nname: pi05\n", "\nname: " + name + "\n"}, {pin, pin}}, PI05TestSLO[:]...)
	yaml := EditedManifest(t, root, "pi05", edits...)

	work, home := t.TempDir(), t.TempDir()
	p := &PI05Package{Bin: bin, Name: name, HFHome: filepath.Join(home, "hf")}
	p.Env = append(os.Environ(), "HF_HOME="+p.HFHome, "HF_HUB_CACHE=", "HF_HUB_OFFLINE=1",
		"XDG_CACHE_HOME="+filepath.Join(home, "cache"), "HF_ENDPOINT=http://127.0.0.1:1")

	// The tiny random checkpoint of the parity tests and its test tokenizer,
	// stored as the pinned commit (the real weights cannot be downloaded here).
	ckpt := filepath.Join(work, "checkpoint")
	for src, dst := range map[string]string{
		"kernels/pi05/testdata/tiny/model.safetensors": "model.safetensors",
		"kernels/pi05/testdata/tiny/config.json":       "config.json",
		"models/pi05/spm/testdata/bpe_tiny.model":      "tokenizer.model",
	} {
		copyFile(t, filepath.Join(root, src), filepath.Join(ckpt, dst))
	}
	p.Run(t, root, "weights", "import", ckpt, "lerobot/pi05_base@"+PI05Pin)

	manifestPath := filepath.Join(work, "tt-model.yaml")
	if err := os.WriteFile(manifestPath, yaml, 0o644); err != nil {
		t.Fatal(err)
	}
	p.Run(t, root, "package", "--container", manifestPath, "--out", filepath.Join(work, "build"))
	p.Dir = filepath.Join(work, "build", name)
	var err error
	if p.Wire, err = manifest.ReadWire(builtpkg.At(p.Dir).Path); err != nil {
		t.Fatal(err)
	}
	def := p.Wire.Container.DefaultProfileName()
	p.Profiles = append(p.Profiles, def)
	for _, pr := range p.Wire.Container.Profiles() {
		if pr.Name != def {
			p.Profiles = append(p.Profiles, pr.Name)
		}
	}
	if len(p.Profiles) < 3 {
		t.Fatalf("the package has profiles %v; models/pi05/tt-model.yaml has three", p.Profiles)
	}
	// What a server sees of the package's variables comes from the package
	// alone: the caller's own settings of them are left out.
	profileVars := map[string]bool{}
	for _, name := range p.Profiles {
		own, _ := ProfileEnv(t, p.Wire, name)
		for k := range own {
			profileVars[k] = true
		}
	}
	p.Env = slices.DeleteFunc(p.Env, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return profileVars[k]
	})
	return p
}

// Run runs tt-model in dir with the package's environment and fails the
// test on a non-zero exit; it returns stdout.
func (p *PI05Package) Run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, errOut, err := p.Exec(dir, args...)
	if err != nil {
		t.Fatalf("tt-model %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// Exec runs tt-model in dir with the package's environment.
func (p *PI05Package) Exec(dir string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(p.Bin, args...)
	cmd.Dir, cmd.Env = dir, p.Env
	var o, s bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &s
	err = cmd.Run()
	return o.String(), s.String(), err
}

// ProfileEnv is what a server of profile must see of w's profiles: own, the
// profile's launch environment as the manifest's launch rules give it, and
// foreign, the variables that other profiles set and this one does not,
// which it must not see at all.
func ProfileEnv(t testing.TB, w *manifest.Wire, profile string) (own map[string]string, foreign []string) {
	t.Helper()
	launch := func(name string) manifest.Launch {
		p, err := w.Container.ResolveProfile(name)
		if err != nil {
			t.Fatal(err)
		}
		l, err := manifest.LaunchFor(w.Container.Kind, w.Container.Runtime, w.Weights.Repo, p)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	own = launch(profile).Env
	seen := map[string]bool{}
	for _, p := range w.Container.Profiles() {
		for k := range launch(p.Name).Env {
			if _, ok := own[k]; !ok && !seen[k] {
				seen[k] = true
				foreign = append(foreign, k)
			}
		}
	}
	sort.Strings(foreign)
	return own, foreign
}

// StaticTTModel builds this tree's tt-model (root is the repository root)
// without cgo, as an image on scratch or a Python kind's image carries it,
// into a folder of its own, and returns its path.
func StaticTTModel(t testing.TB, root string) string {
	t.Helper()
	tool := filepath.Join(t.TempDir(), "tt-model")
	cmd := exec.Command("go", "build", "-trimpath", "-o", tool, "./cmd/tt-model")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build tt-model: %v\n%s", err, b)
	}
	return tool
}

// StandInTools is StaticTTModel with the stand-in server (BuildHealthServer)
// beside it as tt-model-server, where `tt-model package` and `serve --host`
// take it from.
func StandInTools(t testing.TB, root string) string {
	t.Helper()
	tool := StaticTTModel(t, root)
	server := filepath.Join(filepath.Dir(tool), "tt-model-server")
	copyFile(t, BuildHealthServer(t), server)
	if err := os.Chmod(server, 0o755); err != nil {
		t.Fatal(err)
	}
	return tool
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// EditedManifest is root's models/<model>/tt-model.yaml with each edit's
// first text replaced by its second, once; a manifest that no longer holds
// the text fails the test, saying so.
func EditedManifest(t testing.TB, root, model string, edits ...[2]string) []byte {
	t.Helper()
	path := filepath.Join(root, "models", model, "tt-model.yaml")
	yaml, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, ed := range edits {
		if !bytes.Contains(yaml, []byte(ed[0])) {
			t.Fatalf("%s no longer has %q; update this test", path, strings.TrimSpace(ed[0]))
		}
		yaml = bytes.Replace(yaml, []byte(ed[0]), []byte(ed[1]), 1)
	}
	return yaml
}
