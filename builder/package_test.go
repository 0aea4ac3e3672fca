package builder

import (
	"archive/tar"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/ttmodel/tt-model/builder/oci"
	"github.com/ttmodel/tt-model/internal/ocilayout"
	"github.com/ttmodel/tt-model/manifest"
)

// TestPackageReproducible: the same inputs and SOURCE_DATE_EPOCH give the
// same digest from another copy of the package into another output
// directory (no host path reaches the image); another epoch gives another.
func TestPackageReproducible(t *testing.T) {
	bin := fixtureBin(t)
	m, work := testPackage(t, nil)
	a := mustPackage(t, packageOpts(m, work, bin, filepath.Join(work, "a"), VerifyRootfs))
	m2, work2 := testPackage(t, nil)
	b := mustPackage(t, packageOpts(m2, work2, bin, filepath.Join(work2, "b"), VerifyRootfs))
	if a.Digest != b.Digest {
		t.Errorf("two packages of the same inputs: %s and %s", a.Digest, b.Digest)
	}
	if got := strings.Join(a.CodeSkipped, " "); got != "models/demo/__pycache__ models/demo/logs models/demo/train.log models/demo/w.safetensors" {
		t.Errorf("code/ skipped %q", got)
	}
	for _, p := range []string{"models/demo/demo.py", "README.md", "app/main.go.txt"} {
		if _, err := os.Stat(filepath.Join(a.Dir, "code", p)); err != nil {
			t.Errorf("code/%s not staged: %v", p, err)
		}
	}
	img, err := ocilayout.Image(filepath.Join(a.Dir, "image"), a.Image)
	if err != nil {
		t.Fatal(err)
	}
	noHostPaths(t, img, work, bin)
	opts := packageOpts(m, work, bin, filepath.Join(work, "c"), VerifyRootfs)
	opts.SourceDateEpoch = "1700000001"
	c := mustPackage(t, opts)
	if c.Digest == a.Digest {
		t.Errorf("another SOURCE_DATE_EPOCH gave the same digest %s", c.Digest)
	}
	for _, r := range []*Result{a, b, c} {
		if info, err := os.Stat(r.Dir); err != nil || info.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v, mode %v; want a 0755 directory", r.Dir, err, info.Mode())
		}
	}
}

// TestPackageFailuresKeepPrevious: a failing verify, a missing source path,
// a source link that leaves its root or dangles, and a bad base each fail
// with a message naming the cause (a source problem at the manifest's
// file:line:col), and leave the previous package and no partial directory
// behind.
func TestPackageFailuresKeepPrevious(t *testing.T) {
	bin := fixtureBin(t)
	m, work := testPackage(t, nil)
	out := filepath.Join(work, "out")
	first := mustPackage(t, packageOpts(m, work, bin, out, VerifyRootfs))
	readme, err := os.ReadFile(filepath.Join(first.Dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, from, to, want string
		links                map[string]string // made under the working directory for this case only
	}{
		{"failing verify", "  - tt-model --version\n", "  - tt-model-server --no-such-flag\n", `verify[0] "tt-model-server --no-such-flag" exited 3`, nil},
		{"verify needs a shell", "  - tt-model --version\n", "  - tt-model --version | grep mini\n", "needs a shell", nil},
		{"missing source path", "    - README.md\n", "    - NO-SUCH-FILE.md\n", `source.code[1]: "NO-SUCH-FILE.md" does not exist`, nil},
		{"source path links to /etc/passwd", "        - app\n", "        - app\n        - passwd\n",
			"edited.yaml:20:11: source.extra_code[0].paths[1]: symlink passwd -> /etc/passwd resolves to /etc/passwd, outside ", map[string]string{"extra/passwd": "/etc/passwd"}},
		{"link in a copied directory leaves the root", "        - app\n", "        - app\n",
			"edited.yaml:19:11: source.extra_code[0].paths[0]: symlink app/hosts -> /etc/hosts resolves to /etc/hosts, outside ", map[string]string{"extra/app/hosts": "/etc/hosts"}},
		{"dangling source link", "        - app\n", "        - app\n",
			"edited.yaml:19:11: source.extra_code[0].paths[0]: symlink app/gone.txt -> no-such.txt dangles", map[string]string{"extra/app/gone.txt": "no-such.txt"}},
		{"source path names the output", "    - root: extra\n      paths:\n        - app\n", "    - root: .\n      paths:\n        - out/demo\n",
			"edited.yaml:19:11: source.extra_code[0].paths[0]: out/demo is inside the package's own output", nil},
		{"bad base dir", "  model: rf-detr\n", "  model: rf-detr\n  base: ./no-such-base\n", `runtime.base`, nil},
		{"base dir without a layout", "  model: rf-detr\n", "  model: rf-detr\n  base: ./tree\n", "not an OCI layout", nil},
		{"bad base file", "  model: rf-detr\n", "  model: rf-detr\n  base: ./tree/README.md\n", "not a docker-archive tarball", nil},
		{"bad profile", "default_profile: one-chip\n", "default_profile: one-chip\n", "no serve profile named", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for link, target := range tc.links {
				at := filepath.Join(work, filepath.FromSlash(link))
				if err := os.Symlink(target, at); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.Remove(at) })
			}
			y, err := os.ReadFile(filepath.Join(work, "tt-model.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			edited := strings.Replace(string(y), tc.from, tc.to, 1)
			file := filepath.Join(work, "edited.yaml")
			if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			// Sources are not checked at load, so the builder's own check runs.
			bad, err := manifest.Load(file, manifest.Options{WorkDir: work})
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			opts := packageOpts(bad, work, bin, out, VerifyRootfs)
			if tc.name == "bad profile" {
				opts.Profile = "no-such"
			}
			_, err = Package(context.Background(), opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Package: %v, want an error containing %q", err, tc.want)
			}
			after, err := os.ReadFile(filepath.Join(first.Dir, "README.md"))
			if err != nil || string(after) != string(readme) {
				t.Errorf("the previous package changed: %v", err)
			}
			w, err := manifest.ReadWire(first.Dir)
			if err != nil || w.Container.Image.Digest != first.Digest {
				t.Errorf("the previous manifest changed: %v", err)
			}
			entries, _ := os.ReadDir(out)
			if len(entries) != 1 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("%s holds %v, want only demo", out, names)
			}
		})
	}
}

// TestPackageOutputInsideTheRoot: with paths ["."] and --out inside that
// root, a package copies neither the previous package nor the one being
// staged: packaging twice gives the same output, of the same size.
func TestPackageOutputInsideTheRoot(t *testing.T) {
	bin := fixtureBin(t)
	m, work := testPackage(t, func(y string) string {
		return strings.Replace(y, "    - root: extra\n      paths:\n        - app\n", "    - root: .\n      paths:\n        - .\n", 1)
	})
	out := filepath.Join(work, "build")
	first := mustPackage(t, packageOpts(m, work, bin, out, VerifyRootfs))
	size := treeSize(t, first.Dir)
	second := mustPackage(t, packageOpts(m, work, bin, out, VerifyRootfs))
	if got := treeSize(t, second.Dir); got != size {
		t.Errorf("the second package is %d bytes, the first %d", got, size)
	}
	if second.CodeSHA256 != first.CodeSHA256 {
		t.Errorf("code/ digest %s, then %s", first.CodeSHA256, second.CodeSHA256)
	}
	if _, err := os.Stat(filepath.Join(second.Dir, "code", "extra", "app", "main.go.txt")); err != nil {
		t.Errorf("the root's own files were not staged: %v", err)
	}
	entries, err := os.ReadDir(filepath.Join(second.Dir, "code", "build"))
	if err != nil || len(entries) != 0 {
		t.Errorf("code/build holds %v (%v), want nothing of the output", entries, err)
	}
}

// treeSize adds up the sizes of the regular files under dir.
func treeSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		n += info.Size()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPackagePythonKindNeedsABase: a Python kind on scratch (no base) is
// refused before anything is built, saying what the base must carry.
func TestPackagePythonKindNeedsABase(t *testing.T) {
	m, work := testPackage(t, func(y string) string {
		y = strings.Replace(y, "kind: tt-go-server", "kind: tt-dit-server", 1)
		return strings.Replace(y, "runtime:\n  model: rf-detr\n", "runtime:\n  app: models.demo.demo:app\n", 1)
	})
	_, err := Package(context.Background(), packageOpts(m, work, "", filepath.Join(work, "out"), VerifyRootfs))
	if err == nil || !strings.Contains(err.Error(), "kind tt-dit-server needs a base image with bash and Python") {
		t.Errorf("Package of a tt-dit-server manifest without a base: %v", err)
	}
}

// TestPackageOnLayoutAndArchiveBases builds a Docker-typed base with a
// usrmerge-style /lib64 symlink and its own accounts, writes it as an OCI
// layout and as a docker-archive tarball, and packages on each: the result
// is OCI throughout, keeps the base's layers and accounts, and does not
// replace the symlink with a directory.
func TestPackageOnLayoutAndArchiveBases(t *testing.T) {
	bin := fixtureBin(t)
	dir := t.TempDir()
	base := testBaseImage(t)
	baseDigest, _ := base.Digest()
	layoutDir := filepath.Join(dir, "base-layout")
	if err := oci.WriteLayout(layoutDir, base, "base:1"); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "base.tar")
	writeDockerArchive(t, archive, base)

	for _, ref := range []string{layoutDir, archive} {
		t.Run(filepath.Base(ref), func(t *testing.T) {
			// Named relative to the working directory, as a package would.
			rel := "./" + filepath.Base(ref)
			m, work := testPackage(t, func(y string) string {
				return strings.Replace(y, "  model: rf-detr\n", "  model: rf-detr\n  base: "+rel+"\n", 1)
			})
			if err := os.Rename(ref, filepath.Join(work, filepath.Base(ref))); err != nil {
				t.Fatal(err)
			}
			res := mustPackage(t, packageOpts(m, work, bin, filepath.Join(work, "out"), VerifyRootfs))
			img, err := ocilayout.Image(filepath.Join(res.Dir, "image"), res.Image)
			if err != nil {
				t.Fatal(err)
			}
			mf, err := img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			if mf.MediaType != types.OCIManifestSchema1 || mf.Config.MediaType != types.OCIConfigJSON {
				t.Errorf("manifest %s config %s, want OCI", mf.MediaType, mf.Config.MediaType)
			}
			for i, l := range mf.Layers {
				if l.MediaType != types.OCILayer {
					t.Errorf("layer %d is %s, want %s", i, l.MediaType, types.OCILayer)
				}
			}
			baseLayers, _ := base.Layers()
			d0, _ := baseLayers[0].Digest()
			if len(mf.Layers) != 5 || mf.Layers[0].Digest != d0 {
				t.Errorf("layers %v, want the base layer %s then 4 of ours", mf.Layers, d0)
			}
			noHostPaths(t, img, work, bin)
			if mf.Annotations["org.opencontainers.image.base.digest"] != baseDigest.String() ||
				mf.Annotations["org.opencontainers.image.base.name"] != rel {
				t.Errorf("base annotations %v, want %s named %s", mf.Annotations, baseDigest, rel)
			}
			cf, _ := img.ConfigFile()
			if cf.Config.Labels["com.example.base"] != "yes" || len(cf.History) != 6 {
				t.Errorf("base label %q, %d history entries (want the base's 2 + 4)", cf.Config.Labels["com.example.base"], len(cf.History))
			}
			files := imageFiles(t, img)
			for _, link := range []string{"/lib", "/lib64"} {
				if files[link] != "symlink" {
					t.Errorf("%s is %q in the image, want the base's symlink", link, files[link])
				}
			}
			// Our libraries land through the links; no layer of ours names
			// a directory the base reaches through them.
			ours, _ := img.Layers()
			for _, l := range ours[1:] {
				rc, _ := l.Uncompressed()
				tr := tar.NewReader(rc)
				for {
					hdr, err := tr.Next()
					if err != nil {
						break
					}
					if hdr.Typeflag == tar.TypeDir && (strings.HasPrefix(hdr.Name, "lib/") || strings.HasPrefix(hdr.Name, "lib64/")) {
						t.Errorf("a layer of ours has the directory %s under a base symlink", hdr.Name)
					}
				}
				rc.Close()
			}
			// (The verify run above found them through the links.)
			if files["/lib/x86_64-linux-gnu/libc.so.6"] == "" || files["/lib64/ld-linux-x86-64.so.2"] == "" {
				t.Error("the image lacks libc or the loader")
			}
			if !strings.Contains(files["/etc/passwd"], "daemon:x:1:1:") || !strings.Contains(files["/etc/passwd"], "tt:x:1000:1000:") {
				t.Errorf("/etc/passwd:\n%s", files["/etc/passwd"])
			}
		})
	}
}

// noHostPaths fails when the image's manifest or config names a directory
// of this machine: the digest must not depend on where the inputs live.
func noHostPaths(t *testing.T, img v1.Image, dirs ...string) {
	t.Helper()
	mf, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if strings.Contains(string(mf), d) || strings.Contains(string(cf), d) {
			t.Errorf("the image's manifest or config names the host directory %s", d)
		}
	}
}

// package says in one line what code/ left out, by folder, instead of a
// line per file.
func TestSkippedSummary(t *testing.T) {
	got := skippedSummary([]string{"models/rfdetr/testdata/a.bin", "models/rfdetr/testdata/b.bin", "kernels/pi05/testdata/tiny/model.safetensors", "train.log"})
	want := "code/: skipped 4 file(s) as build detritus or weights, in models/rfdetr/testdata/ (2), kernels/pi05/testdata/tiny/ (1), ./ (1) (package --json lists them)"
	if got != want {
		t.Errorf("skippedSummary =\n%q\nwant\n%q", got, want)
	}
	if got := skippedSummary(nil); got != "" {
		t.Errorf("nothing skipped: %q", got)
	}
}
