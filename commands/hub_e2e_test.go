package commands

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/hub/hubtest"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
	"github.com/ttmodel/tt-model/manifest"
)

// TestRFDETRHubRoundTrip is the author and operator loops end to end with
// the real binaries: package models/rf-detr, push it to a local Hub, pull it
// back (byte-identical: every file's sha256, the image digest), serve it by
// name on the Docker engine, answer /predict through `tt-model curl`, stop
// it, remove it. The Hub serves a random full-size checkpoint at the pinned
// weights revision (the real one cannot be downloaded here).
func TestRFDETRHubRoundTrip(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "packages and serves the real server: skipped with -short")
	}
	testenv.Require(t, "docker")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tt := buildCLI(t, root)

	srv := hubtest.New()
	defer srv.Close()
	srv.AddToken("write-token", hubtest.Token{User: "acme", Write: true})
	weights := rfdetrHubFiles(t)
	const pin = "7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a"
	srv.AddCommitAt("Roboflow/rf-detr-base", "main", pin, weights)

	name := fmt.Sprintf("hube2e-%d", os.Getpid())
	repo := "acme/" + name
	yaml, err := os.ReadFile(filepath.Join(root, "models", "rf-detr", "tt-model.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(yaml, []byte("\nname: rf-detr\n")) {
		t.Fatal("models/rf-detr/tt-model.yaml no longer has name: rf-detr; update this test")
	}
	yaml = bytes.Replace(yaml, []byte("\nname: rf-detr\n"), []byte("\nname: "+name+"\n"), 1)
	work := t.TempDir()
	manifestPath := filepath.Join(work, "tt-model.yaml")
	if err := os.WriteFile(manifestPath, yaml, 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "HF_ENDPOINT="+srv.URL, "HF_TOKEN=write-token", "HF_HOME="+filepath.Join(work, "hf"),
		"HF_HUB_CACHE=", "HF_HUB_OFFLINE=", "XDG_CACHE_HOME="+filepath.Join(work, "xdg"))
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(tt, args...)
		cmd.Dir, cmd.Env = root, env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("tt-model %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
		}
		return out.String()
	}
	t.Cleanup(func() { removeContainersAndImages(t, name) })

	run("package", "--container", manifestPath, "--out", filepath.Join(work, "build"))
	pkgDir := filepath.Join(work, "build", name)
	if out := run("push", pkgDir, "--repo", repo); !strings.Contains(out, repo+" pushed") {
		t.Fatalf("push:\n%s", out)
	}
	if out := run("push", pkgDir, "--repo", repo); !strings.Contains(out, "up to date") {
		t.Errorf("second push:\n%s", out)
	}
	out := run("pull", repo)
	head := srv.Head(repo, "main")
	if !strings.Contains(out, repo+"@"+head) {
		t.Fatalf("pull:\n%s", out)
	}
	snap := filepath.Join(work, "hf", "hub", "models--acme--"+name, "snapshots", head)
	pushed := map[string][]byte{}
	for _, f := range srv.Files(repo, "main") {
		pushed[f.Path] = f.Data
	}
	local := treeHashes(t, pkgDir)
	pulled := treeHashes(t, snap)
	for p, sum := range local {
		if p == "README.md" {
			continue // the card is rewritten for the repo; it is compared with what was pushed below
		}
		if pulled[p] != sum {
			t.Errorf("%s: pulled sha256 %s, packaged %s", p, pulled[p], sum)
		}
	}
	for p, sum := range pulled {
		if d, ok := pushed[p]; !ok || sha256Hex(d) != sum {
			t.Errorf("%s: pulled file differs from the one on the Hub", p)
		}
	}
	lw, err := manifest.ReadWire(pkgDir)
	if err != nil {
		t.Fatal(err)
	}
	pw, err := manifest.ReadWire(snap)
	if err != nil {
		t.Fatal(err)
	}
	if lw.Container.Image.Digest == "" || pw.Container.Image.Digest != lw.Container.Image.Digest {
		t.Errorf("image digest: pulled %s, packaged %s", pw.Container.Image.Digest, lw.Container.Image.Digest)
	}

	out = run("serve", repo, "--print")
	if !strings.HasPrefix(out, "docker run --detach --name tt-model-"+name+"-default ") || !strings.Contains(out, " "+lw.Container.Image.Tag+" supervise ") {
		t.Errorf("serve --print:\n%s", out)
	}
	out = run("serve", repo, "--timeout", "5m")
	if !strings.Contains(out, name+" is ready") {
		t.Fatalf("serve:\n%s", out)
	}
	out = run("curl", name)
	if !strings.Contains(out, "/v1/models: model Roboflow/rf-detr-base\n") || !strings.Contains(out, "detections above threshold 0.5") {
		t.Errorf("curl:\n%s", out)
	}
	out = run("curl", name, "--json")
	if !strings.Contains(out, `"id":"Roboflow/rf-detr-base"`) || !strings.Contains(out, `"detections":`) {
		t.Errorf("curl --json:\n%s", out)
	}
	run("stop", name)
	if out = run("list"); !strings.Contains(out, repo) || !strings.Contains(out, "present") {
		t.Errorf("list:\n%s", out)
	}
	run("rm", repo, "--include-weights")
	if out = run("list"); strings.Contains(out, repo) {
		t.Errorf("list after rm:\n%s", out)
	}
}

func sha256Hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// treeHashes maps every file under dir (links followed) to its sha256.
func treeHashes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = sha256Hex(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// removeContainersAndImages force-removes what the engine holds of package
// name, passed or not.
func removeContainersAndImages(t *testing.T, name string) {
	ctx := context.Background()
	c, err := client.New(client.FromEnv)
	if err != nil {
		return
	}
	defer c.Close()
	c.ContainerRemove(ctx, "tt-model-"+name+"-default", client.ContainerRemoveOptions{Force: true})
	imgs, err := c.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("reference", "tt-model/"+name)})
	if err != nil {
		return
	}
	for _, img := range imgs.Items {
		for _, ref := range img.RepoTags {
			if _, err := c.ImageRemove(ctx, ref, client.ImageRemoveOptions{Force: true}); err != nil {
				t.Logf("cleanup: remove image %s: %v", ref, err)
			}
		}
	}
}
