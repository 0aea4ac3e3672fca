package hub

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSnapshot lays out repo@commit in the cache at hubDir with a weights
// file, and refs/main -> main when main is not "".
func fakeSnapshot(t *testing.T, hubDir, repo, commit, main string) string {
	t.Helper()
	c := Cache{Dir: hubDir}
	snap := c.SnapshotDir(repo, commit)
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, "model.safetensors"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if main != "" {
		if err := c.WriteRef(repo, "main", main); err != nil {
			t.Fatal(err)
		}
	}
	return snap
}

func TestLocateWeights(t *testing.T) {
	const repo = "lerobot/pi05_base"
	pin, other := strings.Repeat("b", 40), strings.Repeat("c", 40)
	root := t.TempDir()
	home := filepath.Join(root, "home")
	hubDir := filepath.Join(home, ".cache", "huggingface", "hub")
	pinned := fakeSnapshot(t, hubDir, repo, pin, other)
	mainSnap := fakeSnapshot(t, hubDir, repo, other, "")
	hfHomeSnap := fakeSnapshot(t, filepath.Join(root, "hfhome", "hub"), repo, pin, "")
	hubCacheSnap := fakeSnapshot(t, filepath.Join(root, "hubcache"), repo, pin, "")
	empty, plain := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(plain, "model.safetensors"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, ok := WeightsFor("pi05")
	if !ok {
		t.Fatal("no weights naming for pi05")
	}
	cases := []struct {
		name         string
		env          map[string]string
		pin          string
		wantDir      string
		wantRepo     string
		wantRevision string
		wantErr      []string // every place the error must name, in order
	}{
		{name: "override wins over HF_MODEL", env: map[string]string{"PI05_WEIGHTS_DIR": mainSnap, "HF_MODEL": "x/y"}, wantDir: mainSnap},
		{name: "override without weights", env: map[string]string{"PI05_WEIGHTS_DIR": empty, "HOME": home},
			wantErr: []string{"PI05_WEIGHTS_DIR=" + empty + ": has no model.safetensors"}},
		{name: "HF_MODEL is the snapshot folder serve passes", env: map[string]string{"HF_MODEL": pinned, "TT_WEIGHTS_REVISION": "main"},
			wantDir: pinned, wantRepo: repo, wantRevision: pin},
		{name: "HF_MODEL is a plain folder", env: map[string]string{"HF_MODEL": plain}, wantDir: plain},
		{name: "repo id at the pin, refs/main elsewhere", env: map[string]string{"HF_MODEL": repo, "HOME": home}, pin: pin,
			wantDir: pinned, wantRepo: repo, wantRevision: pin},
		{name: "TT_WEIGHTS_REVISION wins over the pin", env: map[string]string{"HF_MODEL": repo, "HOME": home, "TT_WEIGHTS_REVISION": "main"}, pin: pin,
			wantDir: mainSnap, wantRepo: repo, wantRevision: other},
		{name: "default repo through refs/main", env: map[string]string{"HOME": home}, wantDir: mainSnap, wantRepo: repo, wantRevision: other},
		{name: "HF_HOME", env: map[string]string{"HF_HOME": filepath.Join(root, "hfhome"), "HOME": "/nonexistent"}, pin: pin,
			wantDir: hfHomeSnap, wantRepo: repo, wantRevision: pin},
		{name: "HF_HUB_CACHE wins over HF_HOME", env: map[string]string{"HF_HUB_CACHE": filepath.Join(root, "hubcache"), "HF_HOME": "/nonexistent"}, pin: pin,
			wantDir: hubCacheSnap, wantRepo: repo, wantRevision: pin},
		{name: "pinned commit not cached", env: map[string]string{"HOME": home, "TT_WEIGHTS_REVISION": strings.Repeat("a", 40)},
			wantErr: []string{"PI05_WEIGHTS_DIR: unset", "lerobot/pi05_base at TT_WEIGHTS_REVISION " + strings.Repeat("a", 40) + " in the HF cache: snapshot " + filepath.Join(hubDir, "models--lerobot--pi05_base", "snapshots", strings.Repeat("a", 40)) + " no such folder"}},
		{name: "unknown ref", env: map[string]string{"HOME": home, "TT_WEIGHTS_REVISION": "v2"},
			wantErr: []string{"PI05_WEIGHTS_DIR: unset", `TT_WEIGHTS_REVISION "v2"`, filepath.Join("refs", "v2") + " absent"}},
		{name: "bad repo id", env: map[string]string{"HF_MODEL": "just-a-name", "HOME": home}, wantErr: []string{"PI05_WEIGHTS_DIR: unset", "HF_MODEL=just-a-name: neither a folder nor a Hub repo id"}},
		{name: "path that is not a folder", env: map[string]string{"HF_MODEL": "/no/such/dir"}, wantErr: []string{"HF_MODEL=/no/such/dir (a path): no such folder"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			loc, err := w.Locate(func(k string) string { return c.env[k] }, c.pin)
			if c.wantErr != nil {
				if err == nil {
					t.Fatalf("found %+v, want an error", loc)
				}
				msg, at := err.Error(), 0
				for _, want := range c.wantErr {
					i := strings.Index(msg[at:], want)
					if i < 0 {
						t.Fatalf("error lacks %q (in order):\n%s", want, msg)
					}
					at += i + len(want)
				}
				if !strings.Contains(msg, "PI05_WEIGHTS_DIR=<folder with model.safetensors>") {
					t.Errorf("error gives no way out:\n%s", msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if loc.Dir != c.wantDir || loc.Repo != c.wantRepo || loc.Revision != c.wantRevision {
				t.Errorf("got %+v, want dir %s repo %q revision %q", loc, c.wantDir, c.wantRepo, c.wantRevision)
			}
		})
	}
}

func TestModelID(t *testing.T) {
	snap := fakeSnapshot(t, t.TempDir(), "lerobot/pi05_base", strings.Repeat("d", 40), "")
	for _, c := range []struct{ in, want string }{
		{"", "lerobot/pi05_base"},
		{"org/name", "org/name"},
		{snap, "lerobot/pi05_base"},
		{"/hf/hub/models--lerobot--pi05_base/snapshots/" + strings.Repeat("d", 40), "lerobot/pi05_base"},
		{"/data/my-weights", "/data/my-weights"},
	} {
		if got := ModelID(c.in, "lerobot/pi05_base"); got != c.want {
			t.Errorf("ModelID(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
