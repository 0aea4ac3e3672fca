package rfdetr

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testCommit = "7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a"

// makeHubCache lays out <hub>/models--Roboflow--rf-detr-base as
// huggingface_hub does: refs/main holding the commit, snapshots/<commit>/.
func makeHubCache(t *testing.T, hub string) string {
	t.Helper()
	repo := filepath.Join(hub, "models--Roboflow--rf-detr-base")
	snap := filepath.Join(repo, "snapshots", testCommit)
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(testCommit), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, WeightsFile), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestFindWeights(t *testing.T) {
	root := t.TempDir()
	snap := makeHubCache(t, filepath.Join(root, "home", ".cache", "huggingface", "hub"))
	makeHubCache(t, filepath.Join(root, "hfhome", "hub"))
	makeHubCache(t, filepath.Join(root, "hubcache"))
	emptyDir := t.TempDir()
	cases := []struct {
		name    string
		env     map[string]string
		wantDir string
		wantErr string
	}{
		{"override", map[string]string{"TT_RF_DETR_WEIGHTS": snap, "HF_MODEL": "x/y"}, snap, ""},
		{"override without weights", map[string]string{"TT_RF_DETR_WEIGHTS": emptyDir}, "", "TT_RF_DETR_WEIGHTS=" + emptyDir + ": has no model.safetensors"},
		{"HF_MODEL is a snapshot path", map[string]string{"HF_MODEL": snap}, snap, ""},
		{"home cache, pinned commit", map[string]string{"HOME": filepath.Join(root, "home"), "HF_MODEL": "Roboflow/rf-detr-base", "TT_WEIGHTS_REVISION": testCommit}, snap, ""},
		{"default repo and ref main", map[string]string{"HOME": filepath.Join(root, "home")}, snap, ""},
		{"HF_HOME", map[string]string{"HF_HOME": filepath.Join(root, "hfhome"), "HOME": "/nonexistent"},
			filepath.Join(root, "hfhome", "hub", "models--Roboflow--rf-detr-base", "snapshots", testCommit), ""},
		{"HF_HUB_CACHE wins", map[string]string{"HF_HUB_CACHE": filepath.Join(root, "hubcache"), "HF_HOME": "/nonexistent"},
			filepath.Join(root, "hubcache", "models--Roboflow--rf-detr-base", "snapshots", testCommit), ""},
		{"revision not cached", map[string]string{"HOME": filepath.Join(root, "home"), "TT_WEIGHTS_REVISION": strings.Repeat("a", 40)}, "", "in the HF cache: snapshot"},
		{"unknown ref", map[string]string{"HOME": filepath.Join(root, "home"), "TT_WEIGHTS_REVISION": "v2"}, "", `TT_WEIGHTS_REVISION "v2" in the HF cache: ref`},
		{"bad repo id", map[string]string{"HF_MODEL": "just-a-name", "HOME": root}, "", "neither a folder nor a Hub repo id"},
		{"path that is not a dir", map[string]string{"HF_MODEL": "/no/such/dir"}, "", "HF_MODEL=/no/such/dir (a path): no such folder"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, err := FindWeights(func(k string) string { return c.env[k] })
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if src.Dir != c.wantDir {
				t.Errorf("dir = %s, want %s", src.Dir, c.wantDir)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, body, wantErr string
		check               func(Config) bool
	}{
		{"labels", `{"model_type":"rf_detr","id2label":{"17":"kitty","0":"N/A"}}`, "", func(c Config) bool {
			l := Labels(c.ID2Label)
			return c.ModelType == "rf_detr" && l[17] == "kitty" && l[63] == "couch" && l[12] == "N/A"
		}},
		{"no id2label", `{"num_queries":300}`, "", func(c Config) bool { return c.Present && Labels(c.ID2Label)[75] == "remote" }},
		{"bad json", `{`, "config.json", nil},
		{"bad key", `{"id2label":{"cat":"17"}}`, `id2label key "cat" is not a class id`, nil},
		{"key out of range", `{"id2label":{"91":"x"}}`, `id2label key "91"`, nil},
		{"wrong type", `{"id2label":["a"]}`, "id2label must map", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := LoadConfig(write("config.json", c.body))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || !c.check(cfg) {
				t.Errorf("config %+v, err %v", cfg, err)
			}
		})
	}
	cfg, err := LoadConfig(filepath.Join(dir, "absent.json"))
	if err != nil || cfg.Present {
		t.Errorf("missing config: %+v %v", cfg, err)
	}
}
