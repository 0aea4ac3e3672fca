package builder

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/ttmodel/tt-model/internal/testing/textcheck"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/builder/card"
	"github.com/ttmodel/tt-model/internal/ocilayout"
	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
	"github.com/ttmodel/tt-model/manifest"
)

// needTool skips a test whose real tool is missing here (.ci/run installs
// skopeo, umoci and docker-registry).
func needTool(t *testing.T, name string) string {
	t.Helper()
	testenv.Require(t, name)
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// TestPackageImageOnRealTools packages the test package with verify on the
// Docker engine, then has skopeo, umoci, go-containerregistry's validate and
// a container on the engine read the result.
func TestPackageImageOnRealTools(t *testing.T) {
	testenv.Require(t, "docker")
	engine, err := connectDocker(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	bin := fixtureBin(t)
	m, work := testPackage(t, nil)
	out := filepath.Join(work, "out")
	res := mustPackage(t, packageOpts(m, work, bin, out, VerifyDocker))
	t.Cleanup(func() {
		_, _ = engine.c.ImageRemove(context.Background(), res.Image, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	if res.VerifiedIn != (dockerRunner{}).Where() {
		t.Errorf("verified in %q, want the Docker engine", res.VerifiedIn)
	}
	dir := filepath.Join(out, "demo")
	layoutDir := filepath.Join(dir, "image")

	t.Run("layout index names the image", func(t *testing.T) {
		var idx struct {
			Manifests []struct {
				MediaType   string            `json:"mediaType"`
				Digest      string            `json:"digest"`
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		b, err := os.ReadFile(filepath.Join(layoutDir, "index.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &idx); err != nil {
			t.Fatal(err)
		}
		if len(idx.Manifests) != 1 {
			t.Fatalf("index has %d manifests, want 1", len(idx.Manifests))
		}
		d := idx.Manifests[0]
		want := "tt-model/demo:" + strings.TrimPrefix(res.Digest, "sha256:")[:12]
		if d.Digest != res.Digest || d.Annotations[ocilayout.RefName] != want || d.MediaType != "application/vnd.oci.image.manifest.v1+json" {
			t.Errorf("index entry %+v, want digest %s named %s (OCI manifest)", d, res.Digest, want)
		}
		if res.Image != want {
			t.Errorf("result image %s, want %s", res.Image, want)
		}
	})

	t.Run("skopeo", func(t *testing.T) {
		needTool(t, "skopeo")
		var insp struct {
			Digest string
			Labels map[string]string
			Env    []string
			Os     string
		}
		b := run(t, "skopeo", "inspect", "oci:"+layoutDir+":"+res.Image)
		if err := json.Unmarshal(b, &insp); err != nil {
			t.Fatalf("skopeo inspect: %v\n%s", err, b)
		}
		if insp.Digest != res.Digest || insp.Os != "linux" {
			t.Errorf("skopeo: digest %s os %s, want %s linux", insp.Digest, insp.Os, res.Digest)
		}
		for k, want := range map[string]string{
			"org.tenstorrent.tt-model":          "demo",
			"org.tenstorrent.tt-model.profiles": "one-chip,two-chip",
			"org.tenstorrent.tt-model.weights":  "Roboflow/rf-detr-base@7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a",
			"org.opencontainers.image.title":    "demo",
			"org.opencontainers.image.licenses": "apache-2.0",
			"org.opencontainers.image.created":  "2023-11-14T22:13:20Z",
		} {
			if insp.Labels[k] != want {
				t.Errorf("label %s = %q, want %q", k, insp.Labels[k], want)
			}
		}
		if !strings.HasSuffix(insp.Labels["org.tenstorrent.tt-model.tt-metal"], "tree") {
			t.Errorf("tt-metal label %q does not name the local tree", insp.Labels["org.tenstorrent.tt-model.tt-metal"])
		}
		var label manifest.Wire
		if err := json.Unmarshal([]byte(insp.Labels["org.tenstorrent.tt-model.manifest"]), &label); err != nil {
			t.Fatalf("manifest label is not a wire manifest: %v", err)
		}
		if label.Name != "demo" || label.Container == nil || label.Container.Built["code_sha256"] != res.CodeSHA256 {
			t.Errorf("manifest label: name %q, built %v", label.Name, label.Container)
		}
		// The image's env holds what both profiles share; MESH_DEVICE and
		// TT_MESH_SHAPE differ between them, so the default profile's go to
		// the supervisor in the entrypoint (checked below).
		env := strings.Join(insp.Env, "\n")
		for _, kv := range []string{"HF_MODEL=Roboflow/rf-detr-base", "HF_HOME=/hf", "TT_METAL_CACHE=/cache",
			"TT_WEIGHTS_REVISION=7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a"} {
			if !strings.Contains(env+"\n", kv+"\n") {
				t.Errorf("env lacks %s:\n%s", kv, env)
			}
		}
		for _, k := range []string{"MESH_DEVICE=", "TT_MESH_SHAPE="} {
			if strings.Contains(env, k) {
				t.Errorf("env carries %s, which differs between the profiles:\n%s", k, env)
			}
		}
		var cfg struct {
			Config struct {
				User         string
				Entrypoint   []string
				Cmd          []string
				ExposedPorts map[string]struct{}
				WorkingDir   string
			} `json:"config"`
			History []struct {
				CreatedBy string `json:"created_by"`
			} `json:"history"`
			RootFS struct {
				DiffIDs []string `json:"diff_ids"`
			} `json:"rootfs"`
		}
		if err := json.Unmarshal(run(t, "skopeo", "inspect", "--config", "oci:"+layoutDir+":"+res.Image), &cfg); err != nil {
			t.Fatal(err)
		}
		c := cfg.Config
		if strings.Join(c.Entrypoint, " ") != "/usr/local/bin/tt-model supervise --default-env MESH_DEVICE=P150 --default-env TT_MESH_SHAPE=1x1 --" ||
			strings.Join(c.Cmd, " ") != "/usr/local/bin/tt-model-server --host 0.0.0.0 --port 8000" ||
			c.User != "1000:1000" || c.WorkingDir != "/home/tt" {
			t.Errorf("config: entrypoint %q cmd %q user %q workdir %q", c.Entrypoint, c.Cmd, c.User, c.WorkingDir)
		}
		if _, ok := c.ExposedPorts["8000/tcp"]; !ok || len(c.ExposedPorts) != 1 {
			t.Errorf("exposed ports %v, want 8000/tcp", c.ExposedPorts)
		}
		if len(cfg.History) != len(cfg.RootFS.DiffIDs) || len(cfg.History) != 4 {
			t.Errorf("%d history entries for %d layers, want one each of 4", len(cfg.History), len(cfg.RootFS.DiffIDs))
		}
	})

	t.Run("umoci", func(t *testing.T) {
		needTool(t, "umoci")
		bundle := filepath.Join(t.TempDir(), "bundle")
		args := []string{"unpack"}
		if os.Geteuid() != 0 {
			args = append(args, "--rootless")
		}
		run(t, "umoci", append(args, "--image", layoutDir+":"+res.Image, bundle)...)
		var spec struct {
			Process struct {
				Args []string
				User struct{ UID, GID int }
				Cwd  string
			}
		}
		b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &spec); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(spec.Process.Args, " "); got != "/usr/local/bin/tt-model supervise --default-env MESH_DEVICE=P150 --default-env TT_MESH_SHAPE=1x1 -- /usr/local/bin/tt-model-server --host 0.0.0.0 --port 8000" {
			t.Errorf("umoci process args %q", got)
		}
		if spec.Process.User.UID != 1000 || spec.Process.User.GID != 1000 {
			t.Errorf("umoci user %+v, want 1000:1000", spec.Process.User)
		}
		for _, p := range []string{"usr/local/bin/tt-model-server", "usr/local/bin/tt-model", "lib64/ld-linux-x86-64.so.2", "lib/x86_64-linux-gnu/libm.so.6"} {
			if _, err := os.Stat(filepath.Join(bundle, "rootfs", p)); err != nil {
				t.Errorf("unpacked rootfs lacks %s: %v", p, err)
			}
		}
		passwd, _ := os.ReadFile(filepath.Join(bundle, "rootfs", "etc", "passwd"))
		if !strings.Contains(string(passwd), "tt:x:1000:1000:") {
			t.Errorf("/etc/passwd has no tt user:\n%s", passwd)
		}
		if os.Geteuid() == 0 {
			for _, d := range []string{"cache", "home/tt", "hf"} {
				info, err := os.Stat(filepath.Join(bundle, "rootfs", d))
				if err != nil {
					t.Fatal(err)
				}
				if ownerUID(info) != 1000 {
					t.Errorf("/%s is owned by %d, want 1000", d, ownerUID(info))
				}
			}
		}
	})

	t.Run("validate", func(t *testing.T) {
		img, err := ocilayout.Image(layoutDir, res.Image)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate.Image(img); err != nil {
			t.Errorf("validate.Image: %v", err)
		}
		mf, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, l := range mf.Layers {
			sum += l.Size
		}
		if sum != res.Compressed || res.Uncompressed <= sum {
			t.Errorf("summary sizes %d compressed / %d uncompressed; the layers add up to %d compressed", res.Compressed, res.Uncompressed, sum)
		}
	})

	t.Run("docker run --version", func(t *testing.T) {
		var buf bytes.Buffer
		code, err := engine.run(context.Background(), res.Image, []string{"/usr/local/bin/tt-model-server", "--version"}, nil, &buf)
		if err != nil || code != 0 {
			t.Fatalf("tt-model-server --version in a container: exit %d, %v\n%s", code, err, buf.String())
		}
		if !strings.HasPrefix(buf.String(), "miniserver 1") {
			t.Errorf("--version printed %q", buf.String())
		}
	})

	t.Run("wire manifest and card", func(t *testing.T) {
		w, err := manifest.ReadWire(dir)
		if err != nil {
			t.Fatal(err)
		}
		c := w.Container
		if c.Image.Digest != res.Digest || c.Image.Tag != res.Image || c.Built["image_digest"] != res.Digest ||
			c.Built["code_sha256"] != res.CodeSHA256 || c.Built["created_at"] != "2023-11-14T22:13:20Z" {
			t.Errorf("wire image %+v built %v", c.Image, c.Built)
		}
		readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		again, _, err := card.Render(w)
		if err != nil || again != string(readme) {
			t.Errorf("README.md differs from the card of the staged manifest (%v)", err)
		}
		textcheck.InOrder(t, string(readme), "---\nlicense: apache-2.0\npipeline_tag: object-detection\nbase_model:", "# demo",
			"## Quickstart", "## Serve profiles", "## Using it", "## Expected performance", "## Limitations", "## Provenance", res.Digest)
		if _, err := os.Stat(filepath.Join(dir, "code", "models", "demo", "demo.py")); err != nil {
			t.Errorf("code/ not staged: %v", err)
		}
	})
}

// TestPushToDockerRegistry pushes a package to Debian's docker-registry on
// 127.0.0.1 and reads it back with skopeo.
func TestPushToDockerRegistry(t *testing.T) {
	testenv.Require(t, "registry")
	needTool(t, "skopeo")
	addr := servertest.StartRegistry(t)
	bin := fixtureBin(t)
	m, work := testPackage(t, nil)
	res := mustPackage(t, packageOpts(m, work, bin, filepath.Join(work, "out"), VerifyRootfs))
	dir := filepath.Join(work, "out", "demo")

	pushed, err := Push(context.Background(), dir, PushOptions{Registry: addr + "/tt", Tags: []string{"latest"}, Insecure: true, Log: testLog{}})
	if err != nil {
		t.Fatalf("Push: %v", err)
	}
	if pushed.Reference() != addr+"/tt/demo@"+res.Digest {
		t.Errorf("pushed %s, want %s/tt/demo@%s", pushed.Reference(), addr, res.Digest)
	}
	for _, tag := range []string{strings.TrimPrefix(res.Digest, "sha256:")[:12], "latest"} {
		var insp struct{ Digest string }
		b := run(t, "skopeo", "inspect", "--tls-verify=false", "docker://"+addr+"/tt/demo:"+tag)
		if err := json.Unmarshal(b, &insp); err != nil {
			t.Fatal(err)
		}
		if insp.Digest != res.Digest {
			t.Errorf("registry tag %s has digest %s, want %s", tag, insp.Digest, res.Digest)
		}
	}

	// The registry image is also a base: package on top of it.
	base, work2 := testPackage(t, func(y string) string {
		return strings.Replace(y, "  model: rf-detr\n", "  model: rf-detr\n  base: "+addr+"/tt/demo:latest\n", 1)
	})
	res2 := mustPackage(t, packageOpts(base, work2, bin, filepath.Join(work2, "out"), VerifyRootfs))
	if res2.Base != addr+"/tt/demo:latest" || res2.Digest == res.Digest {
		t.Errorf("package on a registry base: base %q digest %s", res2.Base, res2.Digest)
	}

	_, err = Push(context.Background(), dir, PushOptions{Insecure: true})
	if err == nil || !strings.Contains(err.Error(), "--registry") {
		t.Errorf("push of an hf package without --registry: %v, want a hint at --registry", err)
	}
}
