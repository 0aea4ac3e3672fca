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
		{"0,0", 2, nil, "twice"},
		{"0,x", 2, nil, "comma-separated"},
		{"-1", 1, nil, "comma-separated"},
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

func TestHostChipsAndHugepages(t *testing.T) {
	dev := t.TempDir()
	for _, n := range []string{"3", "0", "1", "not-a-chip"} {
		if err := os.WriteFile(filepath.Join(dev, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := hostChips(dev)
	if err != nil || !reflect.DeepEqual(got, []int{0, 1, 3}) {
		t.Errorf("hostChips = %v, %v", got, err)
	}
	if got, err := hostChips(filepath.Join(dev, "absent")); err != nil || got != nil {
		t.Errorf("absent dir: %v, %v; want none", got, err)
	}
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
	p, err := pickPort(0, others)
	if err != nil || p == FirstPort {
		t.Errorf("pickPort = %d, %v; want a port other than the running instance's %d", p, err, FirstPort)
	}
	if _, err := pickPort(FirstPort, others); err == nil {
		t.Error("a port a running instance holds was accepted")
	}
	if _, err := pickPort(70000, nil); err == nil {
		t.Error("port 70000 accepted")
	}
}

func TestServerEnvPinsSnapshot(t *testing.T) {
	rev := "0123456789012345678901234567890123456789"
	pkg := &Package{Wire: &manifest.Wire{Name: "x", Weights: &manifest.WireWeights{Repo: "org/w", Revision: &rev}}}
	cases := []struct {
		name      string
		env       map[string]string
		weights   []*hub.Snapshot
		token     string
		wantModel string
	}{
		{"pinned", map[string]string{"HF_MODEL": "org/w"}, []*hub.Snapshot{{Commit: rev}}, "", "/hf/hub/models--org--w/snapshots/" + rev},
		{"profile names another model", map[string]string{"HF_MODEL": "/data/other"}, []*hub.Snapshot{{Commit: rev}}, "", "/data/other"},
		{"no snapshot", map[string]string{"HF_MODEL": "org/w"}, nil, "tok", "org/w"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &Spec{Package: pkg, Launch: manifest.Launch{Env: c.env}, Weights: c.weights, HF: hub.Config{Token: c.token}}
			env := s.ServerEnv("/hf", "/hf/hub", "/cache", "/weight-cache")
			if env["HF_MODEL"] != c.wantModel || env["HF_HOME"] != "/hf" || env["TT_METAL_CACHE"] != "/cache" || env["TT_WEIGHT_CACHE"] != "/weight-cache" {
				t.Errorf("env = %v, want HF_MODEL %s", env, c.wantModel)
			}
			if env["HF_TOKEN"] != c.token {
				t.Errorf("HF_TOKEN = %q, want %q", env["HF_TOKEN"], c.token)
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

func TestLineWatcher(t *testing.T) {
	seen := make(chan struct{})
	var out strings.Builder
	w := &lineWatcher{w: &out, needle: "startup complete", seen: seen}
	for _, chunk := range []string{"booting\nApplication start", "up comp", "lete\nmore\n"} {
		w.Write([]byte(chunk))
	}
	select {
	case <-seen:
	default:
		t.Error("the ready line split over three writes was not seen")
	}
	if out.String() != "booting\nApplication startup complete\nmore\n" {
		t.Errorf("output passed through = %q", out.String())
	}
}
