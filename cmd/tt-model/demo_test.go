package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/hub"
)

// TestDemoWeightsLeaveTheUserCache runs the weights step of `make demo` (scripts/demo-weights.sh,
// which scripts/demo.sh and scripts/demo-pi05.sh source) against a user Hugging Face cache that
// holds the real snapshot at the pin, none, or random test weights an older demo stored there: the
// user's cache is byte-identical after each, and generated weights only ever go to the demo's own
// cache, marked.
func TestDemoWeightsLeaveTheUserCache(t *testing.T) {
	bin := buildTool(t)
	const repo, rev = hub.RFDETRRepo, "7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a"
	write := func(files map[string]string) string {
		dir := t.TempDir()
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	cases := []struct {
		name     string
		snapshot map[string]string // imported into the user's cache at the pin; nil: none
		useUser  bool
		say      string
	}{
		{"real snapshot", map[string]string{"model.safetensors": "the real weights", "config.json": "{}"}, true, "in your Hugging Face cache: using it"},
		{"empty cache", nil, false, "stored in the demo's own Hugging Face cache"},
		{"test weights of an older demo", map[string]string{"model.safetensors": "random", "config.json": "{}", hub.TestWeightsFile: "an older demo\n"}, false,
			"tt-model weights pull --refresh models/rf-detr/tt-model.yaml"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			user, demo := t.TempDir(), filepath.Join(t.TempDir(), "demo-hf")
			if tc.snapshot != nil {
				if _, err := (hub.Cache{Dir: filepath.Join(user, "hub")}).Import(repo, rev, write(tc.snapshot)); err != nil {
					t.Fatal(err)
				}
			}
			before := treeDigest(t, user)
			script := `set -euo pipefail
. scripts/demo-weights.sh
mk() { printf 'generated' > "$1/model.safetensors"; echo '{}' > "$1/config.json"; echo 'the test' > "$1/` + hub.TestWeightsFile + `"; }
demo_weights "$TT" models/rf-detr/tt-model.yaml "$REPO" "$REV" "$DEMO_HF" mk
echo "HF_HOME=$HF_HOME test=$demo_test_weights"`
			cmd := exec.Command("bash", "-c", script)
			cmd.Dir = "../.."
			cmd.Env = append(os.Environ(), "TT="+bin, "REPO="+repo, "REV="+rev, "DEMO_HF="+demo,
				"HF_HOME="+user, "HF_HUB_CACHE=", "HF_HUB_OFFLINE=", "HF_ENDPOINT=http://127.0.0.1:1")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("demo_weights: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.say) {
				t.Errorf("output lacks %q:\n%s", tc.say, out)
			}
			if after := treeDigest(t, user); after != before {
				t.Errorf("the user's cache changed:\nbefore\n%s\nafter\n%s", before, after)
			}
			wantHome := "HF_HOME=" + user + " test=\n"
			if !tc.useUser {
				wantHome = "HF_HOME=" + demo + " test=1\n"
				snap := hub.Cache{Dir: filepath.Join(demo, "hub")}.SnapshotDir(repo, rev)
				if what, ok := hub.TestWeightsIn(snap); !ok || what != "the test" {
					t.Errorf("the demo's cache snapshot %s: TestWeightsIn = %q, %v", snap, what, ok)
				}
			} else if _, err := os.Stat(demo); !os.IsNotExist(err) {
				t.Errorf("the demo's own cache was made while the user's held the real weights: %v", err)
			}
			if !strings.HasSuffix(string(out), wantHome) {
				t.Errorf("output ends %q, want %q", out[max(0, len(out)-200):], wantHome)
			}
		})
	}
}

// treeDigest lists every entry under root with its mode, link target or content hash and mtime.
func treeDigest(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(&b, "%s %v %d", rel, fi.Mode(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			fmt.Fprintf(&b, " -> %s", target)
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			fmt.Fprintf(&b, " %s", hex.EncodeToString(sum[:]))
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
