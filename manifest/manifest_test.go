package manifest

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestGoodManifests(t *testing.T) {
	files, _ := filepath.Glob("testdata/good/*.yaml")
	files = append(files, "../models/pi05/tt-model.yaml", "../models/rf-detr/tt-model.yaml")
	for _, f := range files {
		t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) {
			m, err := Load(f, Options{})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			for _, p := range m.Profiles() {
				r, err := m.ResolveProfile(p.Name)
				if err != nil {
					t.Fatalf("resolve %s: %v", p.Name, err)
				}
				if _, err := LaunchFor(m.Kind, m.Runtime, m.Weights.Repo, r); err != nil {
					t.Fatalf("launch %s: %v", p.Name, err)
				}
			}
		})
	}
}

// problems reads the "# problems: N" line of a bad manifest that must
// report exactly N problems (no error caused by another).
func problems(t *testing.T, path string) (int, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "# problems: "); ok {
			n, err := strconv.Atoi(rest)
			if err != nil {
				t.Fatalf("%s: %q: %v", path, line, err)
			}
			return n, true
		}
	}
	return 0, false
}

// wants reads the "# want: L:C text" lines at the top of a bad manifest.
func wants(t *testing.T, path string) []string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# want: "); ok {
			pos, msg, _ := strings.Cut(rest, " ")
			out = append(out, path+":"+pos+": "+msg)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s declares no # want: line", path)
	}
	return out
}

func TestBadManifests(t *testing.T) {
	files, _ := filepath.Glob("testdata/bad/*.yaml")
	if len(files) < 30 {
		t.Fatalf("expected the table of bad manifests, found %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := Load(f, Options{})
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("Load(%s) = %v, want an ErrorList", f, err)
			}
			got := list.Error()
			if n, ok := problems(t, f); ok && len(list) != n {
				t.Errorf("%d problems, want %d:\n%s", len(list), n, indentLines(got))
			}
			for _, w := range wants(t, f) {
				if !strings.Contains(got, w) {
					t.Errorf("missing error\n  want: %s\n  got:\n%s", w, indentLines(got))
				}
			}
		})
	}
}

func indentLines(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }

func TestUnreadable(t *testing.T) {
	_, err := Load("testdata/does-not-exist.yaml", Options{})
	var re *ReadError
	if !errors.As(err, &re) {
		t.Fatalf("got %v, want a ReadError", err)
	}
}

func TestCheckSources(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tree", "models", "here"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "code", "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	yaml := `repo: a/b
name: b
kind: tt-go-server
arch: blackhole
weights: a/w
runtime: {model: rf-detr}
serve: {hardware: p150, mesh_device: P150}
source:
  tt_metal: tree
  code: [models/here, models/gone]
  ubuntu: "22.04"
  python: "3.12"
  extra_code:
    - root: code
      paths: [pkg, missing]
`
	// The manifest lives elsewhere: relative roots resolve against the work dir.
	f := filepath.Join(t.TempDir(), "tt-model.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(f, Options{}); err != nil {
		t.Fatalf("without CheckSources: %v", err)
	}
	_, err := Load(f, Options{CheckSources: true, WorkDir: dir})
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 2 {
		t.Fatalf("got %v, want 2 errors", err)
	}
	for i, want := range []string{
		f + `:10:23: source.code[1]: "models/gone" does not exist under ` + filepath.Join(dir, "tree"),
		f + `:15:20: source.extra_code[0].paths[1]: "missing" does not exist under ` + filepath.Join(dir, "code"),
	} {
		if list[i].Error() != want {
			t.Errorf("error %d:\n got %s\nwant %s", i, list[i], want)
		}
	}
}

// TestCheckSourcesLinks: a symlink among or below the listed paths must
// resolve inside the root it is listed under. One that leaves it (the
// listed path itself, a link inside a listed directory, a directory on the
// way to a listed path), dangles or loops is reported at the path entry,
// naming the link and its target; links that stay inside pass.
func TestCheckSourcesLinks(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"tree/models/here", "code/pkg", "code/loop", "code/ok"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "code/pkg/mod.py"), []byte("m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"tree/models/here/weights": "/etc/passwd",
		"code/pkg/hosts":           "/etc/hosts",
		"code/passwd":              "/etc/passwd",
		"code/gone":                "nowhere",
		"code/loop/a":              "b",
		"code/loop/b":              "a",
		"code/ok/alias.py":         "../pkg/mod.py",
		"code/ok/abs.py":           filepath.Join(dir, "code/pkg/mod.py"),
		"code/via":                 "pkg",
		"code/out":                 "/etc",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	yaml := `repo: a/b
name: b
kind: tt-go-server
arch: blackhole
weights: a/w
runtime: {model: rf-detr}
serve: {hardware: p150, mesh_device: P150}
source:
  tt_metal: tree
  code: [models/here]
  ubuntu: "22.04"
  python: "3.12"
  extra_code:
    - root: code
      paths:
        - pkg
        - passwd
        - gone
        - loop
        - ok
        - via/mod.py
        - out/passwd
`
	f := filepath.Join(t.TempDir(), "tt-model.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(f, Options{CheckSources: true, WorkDir: dir})
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("got %v, want an ErrorList", err)
	}
	tree, code := filepath.Join(dir, "tree"), filepath.Join(dir, "code")
	want := []string{
		f + `:10:10: source.code[0]: symlink models/here/weights -> /etc/passwd resolves to /etc/passwd, outside ` + tree,
		f + `:16:11: source.extra_code[0].paths[0]: symlink pkg/hosts -> /etc/hosts resolves to /etc/hosts, outside ` + code,
		f + `:17:11: source.extra_code[0].paths[1]: symlink passwd -> /etc/passwd resolves to /etc/passwd, outside ` + code,
		f + `:18:11: source.extra_code[0].paths[2]: symlink gone -> nowhere dangles: ` + filepath.Join(code, "nowhere") + `: no such file or directory`,
		f + `:19:11: source.extra_code[0].paths[3]: symlink loop/a -> b: a symlink loop (more than 40 links)`,
		f + `:19:11: source.extra_code[0].paths[3]: symlink loop/b -> a: a symlink loop (more than 40 links)`,
		f + `:22:11: source.extra_code[0].paths[6]: symlink out -> /etc resolves to /etc, outside ` + code,
	}
	if len(list) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(list), len(want), list)
	}
	for i := range want {
		if list[i].Error() != want[i] {
			t.Errorf("error %d:\n got %s\nwant %s", i, list[i], want[i])
		}
	}
}

func TestResolveProfileMerge(t *testing.T) {
	m, err := Load("testdata/good/vllm-plugin.yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		profile string
		check   func(t *testing.T, p Profile)
	}{
		{"latency", func(t *testing.T, p Profile) {
			if *p.MaxNumSeqs != 1 || *p.BlockSize != 64 {
				t.Errorf("scalars: max_num_seqs %d block_size %d", *p.MaxNumSeqs, *p.BlockSize)
			}
			want := map[string]any{"tt": map[string]any{"trace_mode": true, "opts": map[string]any{"a": int64(1), "b": int64(2)}}}
			if !reflect.DeepEqual(p.AdditionalConfig, want) {
				t.Errorf("nested maps merge: got %v", p.AdditionalConfig)
			}
			if got := p.FlatArgs(); !reflect.DeepEqual(got, []string{"--enforce-eager", "--seed", "7"}) {
				t.Errorf("an empty list must not wipe inherited args: got %v", got)
			}
			if p.Capabilities == nil || p.Capabilities.ToolParser != "llama3_json" {
				t.Errorf("capabilities inherited: %+v", p.Capabilities)
			}
		}},
		{"capacity", func(t *testing.T, p Profile) {
			if !reflect.DeepEqual(p.Env, map[string]string{"VLLM_LOG": "info", "EXTRA": "1"}) {
				t.Errorf("env merge: %v", p.Env)
			}
			if *p.MaxNumSeqs != 32 {
				t.Errorf("inherited max_num_seqs: %d", *p.MaxNumSeqs)
			}
		}},
		{"", func(t *testing.T, p Profile) {
			if p.Name != "capacity" {
				t.Errorf("default profile: %s", p.Name)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.profile, func(t *testing.T) {
			p, err := m.ResolveProfile(tt.profile)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, p)
		})
	}
	if _, err := m.ResolveProfile("nope"); err == nil || !strings.Contains(err.Error(), "available: latency, capacity") {
		t.Errorf("unknown profile: %v", err)
	}
}

func TestLaunch(t *testing.T) {
	tests := []struct {
		file, profile string
		argv          []string
		env           []string // KEY=VALUE in the kind's export order
		ready         string
	}{
		{"testdata/good/vllm-plugin.yaml", "latency",
			[]string{"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-num-seqs", "1", "--block-size", "64",
				"--additional-config", `{"tt": {"opts": {"a": 1, "b": 2}, "trace_mode": true}}`,
				"--enable-auto-tool-choice", "--tool-call-parser", "llama3_json", "--enforce-eager", "--seed", "7", "--port", "8000"},
			[]string{"MESH_DEVICE=T3K", "HF_MODEL=meta-llama/Llama-3.1-8B-Instruct", "VLLM_LOG=info"},
			"Application startup complete"},
		{"testdata/good/vllm-fork.yaml", "",
			[]string{"python", "-m", "models.common.readiness_check.run_vllm_server", "--stages", "serve",
				"--model-dir", "models/autoports/qwen", "--hf-model", "Qwen/Qwen2.5-7B", "--mesh-device", "(1, 4)",
				"--max-num-seqs", "8", "--block-size", "32", "--server-timeout", "900", "--port", "8010"},
			[]string{"HF_MODEL=Qwen/Qwen2.5-7B"}, "Server ready at"},
		{"testdata/good/tt-dit-server.yaml", "",
			[]string{"python", "-m", "uvicorn", "--host", "0.0.0.0", "--port", "8000", "--lifespan", "on", "models.tt_dit.server.flux2.app:app"},
			[]string{"HF_MODEL=black-forest-labs/FLUX.2-dev", "MESH_DEVICE=QB2", "FLUX2_MESH_SHAPE=2x2"},
			"Application startup complete"},
		{"testdata/good/http-server.yaml", "",
			[]string{"python", "-m", "whisper_server", "--host", "0.0.0.0", "--port", "8000", "--beam", "5"},
			[]string{"HF_MODEL=openai/whisper-large-v3", "MESH_DEVICE=N150", "TT_MESH_SHAPE=1x1"},
			"Uvicorn running"},
		{"../models/pi05/tt-model.yaml", "single-robot",
			[]string{"tt-model-server", "--host", "0.0.0.0", "--port", "8000"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			m, err := Load(tt.file, Options{})
			if err != nil {
				t.Fatal(err)
			}
			p, err := m.ResolveProfile(tt.profile)
			if err != nil {
				t.Fatal(err)
			}
			l, err := LaunchFor(m.Kind, m.Runtime, m.Weights.Repo, p)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(l.Argv, tt.argv) {
				t.Errorf("argv\n got %q\nwant %q", l.Argv, tt.argv)
			}
			var env []string
			for _, k := range l.EnvOrder {
				env = append(env, k+"="+l.Env[k])
			}
			if len(env) != len(l.Env) {
				t.Errorf("EnvOrder %q does not list the %d keys of Env", l.EnvOrder, len(l.Env))
			}
			if tt.env != nil && !reflect.DeepEqual(env, tt.env) {
				t.Errorf("env\n got %q\nwant %q", env, tt.env)
			}
			if l.ReadyLine != tt.ready {
				t.Errorf("ready line %q, want %q", l.ReadyLine, tt.ready)
			}
		})
	}
}

func TestPi05Package(t *testing.T) {
	m, err := Load("../models/pi05/tt-model.yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"multi-robot":   {"PI05_LAYOUT": "dp", "PI05_SLO_MS": "100", "PI05_SLO_P99_MS": "110", "PI05_SLO_CLOCK_GUARD": "1.69"},
		"single-robot":  {"PI05_LAYOUT": "sp"},
		"disaggregated": {"PI05_LAYOUT": "pd", "PI05_MAX_BATCH": "4"},
	}
	shared := map[string]string{"TT_WEIGHTS_REVISION": "b211f3d44c36b6acfcf7ae94a64e8e96f75a64ba", "PI05_MEGAKERNEL": "mc", "TT_MESH_SHAPE": "1x4", "PI05_NUM_IMAGES": "2", "PI05_ACTION_HORIZON": "50",
		"PI05_NUM_STEPS": "10", "PI05_TOKEN_LEN": "224", "PI05_BATCH_WINDOW_MS": "0", "PI05_HANG_S": "10",
		"PI05_HANG_ACTION": "degrade", "PI05_RESET_ON_START": "auto", "PI05_HANG_MARKER": "/cache/pi05_hang_marker"}
	for name, own := range want {
		p, err := m.ResolveProfile(name)
		if err != nil {
			t.Fatal(err)
		}
		env := map[string]string{}
		for k, v := range shared {
			env[k] = v
		}
		for k, v := range own {
			env[k] = v
		}
		if !reflect.DeepEqual(p.Env, env) {
			t.Errorf("%s env\n got %v\nwant %v", name, p.Env, env)
		}
		if chips, _ := ChipCount(p.Hardware); chips != 4 {
			t.Errorf("%s: %d chips", name, chips)
		}
	}
}

func TestChipsAndMesh(t *testing.T) {
	chips := map[string]int{"p150": 1, "p150a": 1, "P150": 1, "p300x2": 4, "n300x4": 8, "p150x8": 8, "e150": 1, "p100": 1, "e75": 1, "e75x2": 2}
	for hw, want := range chips {
		if got, ok := ChipCount(hw); !ok || got != want {
			t.Errorf("ChipCount(%q) = %d, %v; want %d", hw, got, ok, want)
		}
	}
	for _, bad := range []string{"QB2", "x150", "p999", "", "p150x2x2", "p150x0"} {
		if _, ok := ChipCount(bad); ok {
			t.Errorf("ChipCount(%q) accepted", bad)
		}
	}
	mesh := map[string][2]int{"P300x2": {1, 4}, "QB2": {2, 2}, "BH-Galaxy": {4, 8}, "(1, 4)": {1, 4}, "[2,2]": {2, 2}, "(1, 2,)": {1, 2}}
	for md, want := range mesh {
		r, c, err := MeshShape(md)
		if err != nil || r != want[0] || c != want[1] {
			t.Errorf("MeshShape(%q) = %d,%d,%v", md, r, c, err)
		}
	}
	for _, bad := range []string{"P300x3", "(1,2,3)", "p300x2", "(a, b)"} {
		if _, _, err := MeshShape(bad); err == nil {
			t.Errorf("MeshShape(%q) accepted", bad)
		}
	}
}

func TestWireRoundTrip(t *testing.T) {
	m, err := Load("testdata/good/tt-go-server.yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := m.ToWire(WireInfo{ImageTag: "tt-model/detector:0123456789ab", Digest: "sha256:0123456789ab", TTMetalVersion: "8b98410e730",
		ToolVersion: "0.1.0", CreatedAt: "2026-11-29T00:00:00Z", Hostname: "h", Built: map[string]any{"code_sha256": "x"}})
	path := filepath.Join(t.TempDir(), WireFile)
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadWire(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if back.DeviceCount != 1 || back.Container.Image.Repository != "detector" || back.Container.Image.Registry != "hf" {
		t.Errorf("wire fields: %+v %+v", back, back.Container.Image)
	}
	for _, name := range []string{"fast", "exact"} {
		a, _ := m.ResolveProfile(name)
		b, err := back.Container.ResolveProfile(name)
		if err != nil || !reflect.DeepEqual(a.Env, b.Env) || a.Hardware != b.Hardware {
			t.Errorf("profile %s after round trip: %+v vs %+v (%v)", name, a, b, err)
		}
	}
	if back.Container.DefaultProfileName() != "exact" {
		t.Errorf("default %q", back.Container.DefaultProfileName())
	}
	var raw map[string]any
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"schema_version", "build_key", "kernel_count", "fast_path_kernels", "producer", "weights", "auxiliary_weights", "container"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("wire misses %s", key)
		}
	}
	if raw["schema_version"] != "5.1" || raw["weights"].(map[string]any)["repo_type"] != "model" {
		t.Errorf("wire values: %v %v", raw["schema_version"], raw["weights"])
	}
}

func TestReadWireSchemas(t *testing.T) {
	files, _ := filepath.Glob("testdata/wire/*.json")
	if len(files) == 0 {
		t.Fatal("no wire fixtures")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			w, err := ReadWire(f)
			bad := strings.HasPrefix(filepath.Base(f), "bad-")
			if bad != (err != nil) {
				t.Fatalf("ReadWire(%s) err = %v", f, err)
			}
			if bad {
				return
			}
			// Written back, nothing of the other schemas is lost.
			out := filepath.Join(t.TempDir(), "m.json")
			if err := w.WriteFile(out); err != nil {
				t.Fatal(err)
			}
			var a, b map[string]any
			da, _ := os.ReadFile(f)
			db, _ := os.ReadFile(out)
			_ = json.Unmarshal(da, &a)
			_ = json.Unmarshal(db, &b)
			for k := range a {
				if _, ok := b[k]; !ok {
					t.Errorf("key %s lost on write", k)
				}
			}
		})
	}
}

// TestParseHardware: the one hardware-label grammar, as manifest and kube
// read it: family, revision letter, architecture, boards and chips.
func TestParseHardware(t *testing.T) {
	cases := map[string]Hardware{
		"p150a":  {Board: "p150", Revision: "a", Arch: ArchBlackhole, Boards: 1, PerBoard: 1},
		"P300x2": {Board: "p300", Arch: ArchBlackhole, Boards: 2, PerBoard: 2},
		"n300x4": {Board: "n300", Arch: ArchWormhole, Boards: 4, PerBoard: 2},
		" e75 ":  {Board: "e75", Arch: ArchGrayskull, Boards: 1, PerBoard: 1},
	}
	for label, want := range cases {
		got, err := ParseHardware(label)
		if err != nil || got != want {
			t.Errorf("ParseHardware(%q) = %+v, %v; want %+v", label, got, err, want)
		}
	}
	for label, msg := range map[string]string{
		"q900":   `"q900" names no known board: want one of e150, e75, n150, n300, p100, p150, p300`,
		"QB2":    `"QB2" is not a board label: want <board>[xN]`,
		"p150x0": `board count "0" is not a positive number`,
	} {
		if _, err := ParseHardware(label); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseHardware(%q): %v, want %q", label, err, msg)
		}
	}
}

// A published manifest is someone else's file: a name or revision that
// would name a folder outside the caches is refused on every read.
func TestParseWireRefusesUnsafeNames(t *testing.T) {
	good, err := os.ReadFile("testdata/wire/v51-container.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseWire(good); err != nil {
		t.Fatalf("the good fixture: %v", err)
	}
	cases := []struct{ from, to, want string }{
		{`"name": "rf-detr-p150"`, `"name": "../../../victim"`, `name: "../../../victim" is not a safe slug`},
		{`"name": "rf-detr-p150"`, `"name": ""`, `name: "" is not a safe slug`},
		{`"name": "rf-detr-p150"`, `"name": "a/b"`, `name: "a/b" is not a safe slug`},
		{`"revision": "7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a"`, `"revision": "../../x"`, `weights.revision: revision "../../x": ".." is not allowed`},
		{`"auxiliary_weights": []`, `"auxiliary_weights": [{"repo": "a/b", "revision": "/etc"}]`, `auxiliary_weights[0].revision: revision "/etc": must not start with "/"`},
	}
	for _, tc := range cases {
		data := strings.Replace(string(good), tc.from, tc.to, 1)
		if data == string(good) {
			t.Fatalf("fixture has no %s", tc.from)
		}
		_, err := ParseWire([]byte(data))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %s", tc.to, err, tc.want)
		}
	}
}
