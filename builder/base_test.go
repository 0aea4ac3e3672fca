package builder

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"path"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/ttmodel/tt-model/internal/testing/imagetest"
)

// testBaseImage is a small Docker-typed (not OCI) distro-like base: its own
// accounts, usrmerge links (/lib -> usr/lib, /lib64 -> usr/lib64), a label and an
// empty-layer history step.
func testBaseImage(t *testing.T) v1.Image {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(1600000000, 0)
	for _, h := range []struct {
		hdr  tar.Header
		data string
	}{
		{tar.Header{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755}, ""},
		{tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644}, "root:x:0:0:root:/root:/bin/sh\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"},
		{tar.Header{Name: "etc/group", Typeflag: tar.TypeReg, Mode: 0o644}, "root:x:0:\ndaemon:x:1:\n"},
		{tar.Header{Name: "lib", Typeflag: tar.TypeSymlink, Linkname: "usr/lib", Mode: 0o777}, ""},
		{tar.Header{Name: "lib64", Typeflag: tar.TypeSymlink, Linkname: "usr/lib64", Mode: 0o777}, ""},
		{tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777}, ""},
		{tar.Header{Name: "usr/", Typeflag: tar.TypeDir, Mode: 0o755}, ""},
		{tar.Header{Name: "usr/lib/", Typeflag: tar.TypeDir, Mode: 0o755}, ""},
		{tar.Header{Name: "usr/lib/x86_64-linux-gnu/", Typeflag: tar.TypeDir, Mode: 0o755}, ""},
		{tar.Header{Name: "usr/lib64/", Typeflag: tar.TypeDir, Mode: 0o755}, ""},
	} {
		hdr := h.hdr
		hdr.ModTime = epoch
		hdr.Size = int64(len(h.data))
		if err := tw.WriteHeader(&hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(h.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.DockerLayer))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer, History: v1.History{CreatedBy: "ADD rootfs.tar /"}})
	if err != nil {
		t.Fatal(err)
	}
	img, err = imagetest.Linux(img, func(cf *v1.ConfigFile) {
		cf.Config.Labels = map[string]string{"com.example.base": "yes"}
		cf.Config.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		cf.History = append(cf.History, v1.History{CreatedBy: "ENV PATH=...", EmptyLayer: true})
	})
	if err != nil {
		t.Fatal(err)
	}
	if mt, _ := img.MediaType(); mt != types.DockerManifestSchema2 {
		t.Fatalf("test base is %s, want a Docker-typed image", mt)
	}
	return img
}

func writeDockerArchive(t *testing.T, file string, img v1.Image) {
	t.Helper()
	tag, err := name.NewTag("example.com/base:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(file, tag, img); err != nil {
		t.Fatal(err)
	}
}

// imageFiles maps each path of the image's flattened file system to
// "dir", "symlink", or a regular file's content.
func imageFiles(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]string{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		p := path.Clean("/" + hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			files[p] = "dir"
		case tar.TypeSymlink:
			files[p] = "symlink"
		default:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[p] = string(b)
		}
	}
}
