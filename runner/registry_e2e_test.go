package runner

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/builder"
	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/runner/runnertest"
)

// TestRegistryImagePulledThroughTheEngine: a package whose image was pushed to a registry (its
// manifest names the registry and the digest, no image/ beside it, as a Hub repo pushed with
// --registry holds it) gets its image pulled by digest through the engine and tagged as the
// manifest's tag, with no `docker pull` by hand; a second start finds it there.
func TestRegistryImagePulledThroughTheEngine(t *testing.T) {
	testenv.Require(t, "docker")
	testenv.Require(t, "registry")
	ctx := context.Background()
	d, err := ConnectDocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	name := fmt.Sprintf("regpull-%d", os.Getpid())
	dir, tag := runnertest.StagedPackage(t, name, runnertest.BuildHealthServer(t), strings.Repeat("a", 40))
	addr := servertest.StartRegistry(t)
	pushed, err := builder.Push(ctx, dir, builder.PushOptions{Registry: addr + "/tt", Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	// The Hub repo's copy: the manifest pointing at the registry, no image/.
	w, err := manifest.ReadWire(filepath.Join(dir, manifest.WireFile))
	if err != nil {
		t.Fatal(err)
	}
	w.Container.Image.Registry, w.Container.Image.Digest = addr+"/tt", pushed.Digest
	ptr := t.TempDir()
	if err := w.WriteFile(filepath.Join(ptr, manifest.WireFile)); err != nil {
		t.Fatal(err)
	}
	pkg := &Package{Path: filepath.Join(ptr, manifest.WireFile), Dir: ptr, Wire: w}
	remove := func() {
		d.c.ImageRemove(ctx, tag, client.ImageRemoveOptions{Force: true})
		d.c.ImageRemove(ctx, RegistryImage(w.Container.Image, name), client.ImageRemoveOptions{Force: true})
	}
	remove()
	t.Cleanup(remove)
	if want := addr + "/tt/" + name + "@" + pushed.Digest; RegistryImage(w.Container.Image, name) != want {
		t.Fatalf("RegistryImage = %s, want %s", RegistryImage(w.Container.Image, name), want)
	}

	var progress bytes.Buffer
	got, err := d.ensureImage(ctx, pkg, &progress)
	if err != nil || got != tag || !strings.Contains(progress.String(), "pulling "+addr+"/tt/"+name+"@"+pushed.Digest) {
		t.Fatalf("ensureImage = %q, %v\n%s", got, err, progress.String())
	}
	img, err := d.c.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rd := range img.RepoDigests {
		found = found || strings.HasSuffix(rd, "@"+pushed.Digest)
	}
	if !found {
		t.Errorf("%s in the engine has repo digests %v, want one @%s", tag, img.RepoDigests, pushed.Digest)
	}
	progress.Reset()
	if got, err := d.ensureImage(ctx, pkg, &progress); err != nil || got != tag || progress.Len() != 0 {
		t.Errorf("second ensureImage = %q, %v, said %q; want the image found with nothing pulled", got, err, progress.String())
	}

	// A package whose image rides in the Hub repo (registry hf) is not pulled from anywhere.
	remove()
	w.Container.Image.Registry = "hf"
	if _, err := d.ensureImage(ctx, pkg, &progress); err == nil || !strings.Contains(err.Error(), "the engine has no "+tag) {
		t.Errorf("hf package without image/: %v", err)
	}
}

// TestRegistryAuthFromTheDockerConfig: the pull sends the user's credentials for the registry from
// the Docker config (as `docker pull` does), and nothing for a registry it has none for.
func TestRegistryAuthFromTheDockerConfig(t *testing.T) {
	cfg := t.TempDir()
	conf := `{"auths": {"reg.example:5000": {"auth": "` + base64.StdEncoding.EncodeToString([]byte("ana:s3cret")) + `"}}}`
	if err := os.WriteFile(filepath.Join(cfg, "config.json"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", cfg)
	got, err := registryAuth("reg.example:5000/tt/x@sha256:" + strings.Repeat("0", 64))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.URLEncoding.DecodeString(got)
	if err != nil {
		t.Fatalf("%q: %v", got, err)
	}
	var a struct{ Username, Password, ServerAddress string }
	if err := json.Unmarshal(raw, &a); err != nil || a.Username != "ana" || a.Password != "s3cret" || a.ServerAddress != "reg.example:5000" {
		t.Errorf("X-Registry-Auth %s (%v)", raw, err)
	}
	if got, err := registryAuth("other.example/tt/x@sha256:" + strings.Repeat("0", 64)); err != nil || got != "" {
		t.Errorf("a registry without credentials: %q, %v", got, err)
	}
}
