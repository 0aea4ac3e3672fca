package runner

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/manifest"
)

func TestPickChips(t *testing.T) {
	busy := map[int]string{0: "tt-model-a-default"}
	cases := []struct {
		name      string
		avail     []int
		need      int
		requested []int
		want      []int
		wantErr   string
	}{
		{"no chips on the host", nil, 1, nil, nil, ""},
		{"lowest free", []int{0, 1, 2, 3}, 2, nil, []int{1, 2}, ""},
		{"too few free", []int{0, 1}, 2, nil, nil, "1 of this host's 2 are free (0: tt-model-a-default busy)"},
		{"requested", []int{0, 1, 2, 3}, 2, []int{3, 2}, []int{3, 2}, ""},
		{"requested busy", []int{0, 1}, 1, []int{0}, nil, "chip 0 is used by tt-model-a-default"},
		{"requested absent", []int{0, 1}, 1, []int{7}, nil, "chip 7 is not on this host"},
		{"requested without chips", nil, 1, []int{0}, nil, "this host has no /dev/tenstorrent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := pickChips(c.avail, busy, c.need, c.requested, "/dev/tenstorrent")
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

func TestParseDeviceIDs(t *testing.T) {
	cases := []struct {
		in      string
		need    int
		want    []int
		wantErr string
	}{
		{"0,1", 2, []int{0, 1}, ""},
		{" 3 ", 1, []int{3}, ""},
		{"0-3", 4, []int{0, 1, 2, 3}, ""}, // ranges, as supervise --chips takes them
		{"0,0", 2, nil, "twice"},
		{"0,x", 2, nil, "not a chip id"},
		{"-1", 1, nil, "want a chip id"},
		{"0", 2, nil, "needs 2"},
	}
	for _, c := range cases {
		got, err := parseDeviceIDs(c.in, c.need, "p")
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: err = %v, want %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestHugepages(t *testing.T) {
	cases := map[string]bool{
		"none":    false,
		"mounted": true,
		"2M":      false,
	}
	for name, want := range cases {
		if got := hugepagesMounted(filepath.Join("testdata", "mounts", name)); got != want {
			t.Errorf("hugepagesMounted(%s) = %v, want %v", name, got, want)
		}
	}
}

func TestPickPort(t *testing.T) {
	others := []Instance{{Name: "a", Port: FirstPort, Running: true}, {Name: "b", Port: FirstPort + 1}}
	p, err := pickPort(0, "", others)
	if err != nil || p == FirstPort {
		t.Errorf("pickPort = %d, %v; want a port other than the running instance's %d", p, err, FirstPort)
	}
	if _, err := pickPort(FirstPort, "", others); err == nil {
		t.Error("a port a running instance holds was accepted")
	}
	if _, err := pickPort(70000, "", nil); err == nil {
		t.Error("port 70000 accepted")
	}
}

// ServedWeights applies the servers' own weights rule to the profile's env over the host cache
// (HF_MODEL becomes the snapshot folder only when the rule finds it, and a pi0.5 package
// whose weights it cannot find is refused before start, naming every place looked).
func TestServedWeights(t *testing.T) {
	pin := "0123456789012345678901234567890123456789"
	other := strings.Repeat("e", 40)
	home := t.TempDir()
	hf := hub.Config{HFHome: home, CacheDir: filepath.Join(home, "hub"), Token: "tok"}
	snap := filepath.Join(hf.CacheDir, "models--lerobot--pi05_base", "snapshots", pin)
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, "model.safetensors"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	goServer := func(model string) *Package {
		return &Package{Wire: &manifest.Wire{Name: "p", Weights: &manifest.WireWeights{Repo: "lerobot/pi05_base", Revision: &pin},
			Container: &manifest.Container{Kind: manifest.KindGoServer, Runtime: map[string]any{"model": model}}}}
	}
	pulled := []*hub.Snapshot{{Repo: "lerobot/pi05_base", Commit: pin}}
	cases := []struct {
		name      string
		pkg       *Package
		env       map[string]string
		wantDir   string
		wantModel string // HF_MODEL in the container
		wantErr   string
	}{
		{"pinned repo id", goServer("pi05"), map[string]string{"HF_MODEL": "lerobot/pi05_base"}, snap,
			"/hf/hub/models--lerobot--pi05_base/snapshots/" + pin, ""},
		{"TT_WEIGHTS_REVISION wins over the pin", goServer("pi05"), map[string]string{"HF_MODEL": "lerobot/pi05_base", "TT_WEIGHTS_REVISION": other}, "", "",
			"no pi0.5 weights found; looked at:\n  1. PI05_WEIGHTS_DIR: unset\n  2. HF_MODEL lerobot/pi05_base at TT_WEIGHTS_REVISION " + other},
		{"the model's own folder variable", goServer("pi05"), map[string]string{"HF_MODEL": "lerobot/pi05_base", "PI05_WEIGHTS_DIR": "/w"}, "", "lerobot/pi05_base", ""},
		{"HF_MODEL is a path", goServer("pi05"), map[string]string{"HF_MODEL": "/data/other"}, "", "/data/other", ""},
		{"rf-detr weights absent", goServer("rf-detr"), map[string]string{"HF_MODEL": "Roboflow/rf-detr-base"}, "", "",
			"TT_RF_DETR_WEIGHTS: unset\n  2. HF_MODEL Roboflow/rf-detr-base at the default branch"},
		{"another kind, other weights", &Package{Wire: &manifest.Wire{Name: "v", Container: &manifest.Container{Kind: "vllm-plugin"}}},
			map[string]string{"HF_MODEL": "org/x"}, "", "org/x", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, err := ServedWeights(c.pkg, c.env, hf, pulled)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || dir != c.wantDir {
				t.Fatalf("ServedWeights = %q, %v; want %q", dir, err, c.wantDir)
			}
			s := &Spec{Package: c.pkg, Launch: manifest.Launch{Env: c.env}, HF: hf, WeightsDir: dir}
			env := s.ServerEnv("/hf", "/hf/hub", "/cache")
			if env["HF_MODEL"] != c.wantModel || env["HF_HOME"] != "/hf" || env["TT_METAL_CACHE"] != "/cache" || env["HF_TOKEN"] != "tok" ||
				env["TT_WEIGHT_CACHE"] != "/weight-cache" {
				t.Errorf("env = %v, want HF_MODEL %s", env, c.wantModel)
			}
			if host := s.ServerEnv(hf.HFHome, hf.CacheDir, "/m"); dir != "" && host["HF_MODEL"] != dir {
				t.Errorf("host env HF_MODEL = %s, want %s", host["HF_MODEL"], dir)
			}
		})
	}
}

func TestSupervisedEntrypoint(t *testing.T) {
	cases := []struct {
		name  string
		ep    []string
		l     manifest.Launch
		extra []string
		want  []string
	}{
		{"our supervisor, health probe", []string{"/usr/local/bin/tt-model", "supervise", "--"}, manifest.Launch{Port: 20001, ReadyPath: "/health"}, nil,
			[]string{"/usr/local/bin/tt-model", "supervise", "--ready-url", "http://127.0.0.1:20001/health", "--"}},
		{"our supervisor, ready line, extra flags", []string{"tt-model", "supervise", "--"}, manifest.Launch{ReadyLine: "Application startup complete"},
			[]string{"--reset-cmd", "/opt/reset {chips}"},
			[]string{"tt-model", "supervise", "--ready-line", "Application startup complete", "--reset-cmd", "/opt/reset {chips}", "--"}},
		{"the image's ready line gives way", []string{"/usr/local/bin/tt-model", "supervise", "--ready-line", "old", "--ready-url=http://x/", "--"},
			manifest.Launch{ReadyLine: `"event": "ready"`}, nil,
			[]string{"/usr/local/bin/tt-model", "supervise", "--ready-line", `"event": "ready"`, "--"}},
		{"the image's default profile env gives way", []string{"/usr/local/bin/tt-model", "supervise", "--default-env", "PI05_LAYOUT=dp",
			"--default-env=PI05_SLO_MS=100", "--chips", "0", "--"}, manifest.Launch{Port: 8000, ReadyPath: "/health"}, nil,
			[]string{"/usr/local/bin/tt-model", "supervise", "--chips", "0", "--ready-url", "http://127.0.0.1:8000/health", "--"}},
		{"another entrypoint", []string{"/entrypoint.sh", "--"}, manifest.Launch{ReadyPath: "/health"}, nil, []string{"/entrypoint.sh", "--"}},
		{"none", nil, manifest.Launch{ReadyPath: "/health"}, nil, nil},
	}
	for _, c := range cases {
		if got, err := supervisedEntrypoint(c.ep, c.l, c.extra); err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
	if _, err := supervisedEntrypoint([]string{"/entrypoint.sh"}, manifest.Launch{}, []string{"--reset-cmd", "x"}); err == nil {
		t.Error("supervisor flags for an image without our supervisor were accepted")
	}
}

// The state folder (TT_METAL_CACHE, the weight cache) is named by the
// package: a name that would leave the cache root is refused even when the
// package was built in memory, past the manifest reader's check.
func TestPlanKeepsStateDirUnderCacheRoot(t *testing.T) {
	root := t.TempDir()
	for name, wantErr := range map[string]bool{"rf-detr": false, "../../victim": true, "..": true} {
		pkg := &Package{Path: "p.json", Wire: &manifest.Wire{Name: name, Container: &manifest.Container{
			Kind: manifest.KindGoServer, Runtime: map[string]any{"model": "rf-detr"},
			Serve: manifest.ServeSettings{Hardware: "p150", MeshDevice: "P150"},
		}}}
		spec, err := Plan(pkg, nil, PlanOptions{CacheRoot: root, DevDir: filepath.Join(t.TempDir(), "none")})
		switch {
		case wantErr && (err == nil || !strings.Contains(err.Error(), "package name: ") || !strings.Contains(err.Error(), "leaves "+root)):
			t.Errorf("%q: err = %v, want the name refused", name, err)
		case !wantErr && (err != nil || spec.StateDir != filepath.Join(root, name)):
			t.Errorf("%q: %v, StateDir %v", name, err, spec)
		}
	}
}
