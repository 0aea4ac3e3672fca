package builder

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/cache"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/ttmodel/tt-model/builder/oci"
)

// baseImage is the image our layers go on top of, already converted to OCI
// media types, with what the builder needs to know of its file system.
type baseImage struct {
	Ref    string   // as written in runtime.base ("scratch" when none)
	Image  v1.Image // OCI-typed; its config carries the base's env, user, ...
	Digest string   // manifest digest of the base as found; "" for scratch
	// Tree is the base's flattened file system, so our layers add a parent
	// directory only when the base lacks it and never turn a base symlink
	// (/lib64 -> usr/lib64) into a directory.
	Tree   *oci.Tree
	Passwd []byte // /etc/passwd of the base, nil when it has none
	Group  []byte // /etc/group of the base, nil when it has none
	// Uncompressed is the size of the base's layers as tars.
	Uncompressed int64
	// LayoutDir is the OCI layout holding the base's blobs when it was read
	// from one ("" otherwise): the package's layout links them instead of
	// copying.
	LayoutDir string
}

// Scratch says whether the base is the empty image.
func (b *baseImage) Scratch() bool { return b.Digest == "" }

// loadBase resolves runtime.base (or --base): "scratch" (or empty), an OCI
// layout directory, a docker-archive tarball (docker save), an image the
// Docker engine holds, or a registry reference pulled with the default
// keychain.
// field names where the base was given (runtime.base or --base), for
// errors; ref is the base as written (it goes into labels and annotations, so
// it must not depend on the working directory); at is where to open it (a
// relative path made absolute).
func loadBase(ctx context.Context, field, ref, at, cacheDir string) (*baseImage, error) {
	if ref == "" || ref == "scratch" {
		img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
		return &baseImage{Ref: "scratch", Image: img, Tree: oci.NewTree()}, nil
	}
	img, err := openBase(ctx, at, filepath.Join(cacheDir, "layers"), cacheDir)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", field, ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("%s %q: digest: %w", field, ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("%s %q: config: %w", field, ref, err)
	}
	if cf.OS != "" && (cf.OS != oci.Platform.OS || cf.Architecture != oci.Platform.Architecture) {
		return nil, fmt.Errorf("%s %q is %s/%s; this version builds %s/%s images only",
			field, ref, cf.OS, cf.Architecture, oci.Platform.OS, oci.Platform.Architecture)
	}
	typed, err := toOCI(img)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", field, ref, err)
	}
	b := &baseImage{Ref: ref, Image: typed, Digest: digest.String(), Tree: oci.NewTree()}
	if l, ok := img.(layoutImage); ok {
		b.LayoutDir = l.dir
	}
	if err := b.scanCached(); err != nil {
		return nil, fmt.Errorf("%s %q: read file system: %w", field, ref, err)
	}
	return b, nil
}

// openBase opens the image ref names. cacheDir keeps a pulled image's
// layers; saveDir receives an engine image's export (both in scratch).
func openBase(ctx context.Context, ref, cacheDir, saveDir string) (v1.Image, error) {
	info, statErr := os.Stat(ref)
	switch {
	case statErr == nil && info.IsDir():
		if _, err := os.Stat(filepath.Join(ref, "oci-layout")); err != nil {
			return nil, fmt.Errorf("a directory, but not an OCI layout (no oci-layout file)")
		}
		return imageFromLayout(ref)
	case statErr == nil:
		img, err := tarball.ImageFromPath(ref, nil)
		if err != nil {
			return nil, fmt.Errorf("a file, but not a docker-archive tarball holding one image: %w", err)
		}
		return img, nil
	case strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, "./") || strings.HasPrefix(ref, "../"):
		return nil, fmt.Errorf("no such file or directory")
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("not scratch, an OCI layout directory, a docker-archive tarball, an engine image or a registry reference: %w", err)
	}
	absent := "not looked for in the Docker engine"
	if saveDir != "" {
		img, ok, why, err := imageFromEngine(ctx, ref, saveDir)
		if err != nil {
			return nil, err
		}
		if ok {
			return img, nil
		}
		absent = why
	}
	img, err := remote.Image(r, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithPlatform(oci.Platform))
	if err != nil {
		return nil, fmt.Errorf("%s, and pulling %s failed: %w", absent, r, err)
	}
	if cacheDir == "" {
		return img, nil
	}
	// The base is read twice (its file system, then the layout write):
	// pull each layer once.
	return cache.Image(img, cache.NewFilesystemCache(cacheDir)), nil
}

// imageFromLayout returns the one image of an OCI layout, or its linux/amd64
// image when the index holds several (or one nested index).
func imageFromLayout(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("read OCI layout: %w", err)
	}
	img, err := pickImage(idx, dir)
	if err != nil {
		return nil, err
	}
	return layoutImage{Image: img, dir: dir}, nil
}

// layoutImage is an image read from an OCI layout, which says where.
type layoutImage struct {
	v1.Image
	dir string
}

func pickImage(idx v1.ImageIndex, where string) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("read index of %s: %w", where, err)
	}
	var images []v1.Descriptor
	for _, d := range im.Manifests {
		switch {
		case d.MediaType.IsImage():
			if len(im.Manifests) == 1 || d.Platform == nil || d.Platform.Satisfies(oci.Platform) {
				images = append(images, d)
			}
		case d.MediaType.IsIndex() && len(im.Manifests) == 1:
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("read nested index of %s: %w", where, err)
			}
			return pickImage(child, where)
		}
	}
	if len(images) != 1 {
		return nil, fmt.Errorf("%s holds %d linux/amd64 images; name a layout with exactly one", where, len(images))
	}
	return idx.Image(images[0].Digest)
}

// toOCI rewrites an image's manifest, config and layer media types to their
// OCI equivalents. The blobs are unchanged (a Docker gzip layer is an OCI gzip
// layer byte for byte); only the descriptors change, so no tool sees Docker
// and OCI types mixed in one manifest.
func toOCI(img v1.Image) (v1.Image, error) {
	mt, err := img.MediaType()
	if err != nil {
		return nil, fmt.Errorf("media type: %w", err)
	}
	if mt == types.OCIManifestSchema1 {
		return img, nil
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("layers: %w", err)
	}
	history := cf.History
	bare := cf.DeepCopy()
	bare.RootFS.DiffIDs = nil
	bare.History = nil
	out, err := mutate.ConfigFile(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), bare)
	if err != nil {
		return nil, err
	}
	adds := make([]mutate.Addendum, 0, len(layers))
	for i, l := range layers {
		lmt, err := l.MediaType()
		if err != nil {
			return nil, fmt.Errorf("layer %d media type: %w", i, err)
		}
		var omt types.MediaType
		switch lmt {
		case types.DockerLayer, types.OCILayer:
			omt = types.OCILayer
		case types.DockerUncompressedLayer, types.OCIUncompressedLayer:
			omt = types.OCIUncompressedLayer
		case types.OCILayerZStd:
			omt = types.OCILayerZStd
		default:
			return nil, fmt.Errorf("layer %d has media type %s, which has no OCI equivalent this builder ships", i, lmt)
		}
		adds = append(adds, mutate.Addendum{Layer: l, MediaType: omt})
	}
	out, err = mutate.Append(out, adds...)
	if err != nil {
		return nil, err
	}
	// Append gave every layer an empty history entry; put the base's own
	// history (with its empty-layer steps) back.
	ocf, err := out.ConfigFile()
	if err != nil {
		return nil, err
	}
	ocf = ocf.DeepCopy()
	ocf.History = history
	return mutate.ConfigFile(out, ocf)
}

// scan reads the flattened file system of the base once: the path types and
// the account files; then the size of its layers.
func (b *baseImage) scan() error {
	if err := b.scanTree(); err != nil {
		return err
	}
	layers, err := b.Image.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return err
		}
		b.Uncompressed += n
	}
	return nil
}

func (b *baseImage) scanTree() error {
	rc := mutate.Extract(b.Image)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := path.Clean("/" + hdr.Name)
		if p == "/" {
			continue
		}
		// The flattened stream names every path by its real location, so
		// no parent needs resolving.
		b.Tree.Types[p] = hdr.Typeflag
		if hdr.Typeflag == tar.TypeSymlink {
			b.Tree.Links[p] = hdr.Linkname
		}
		switch p {
		case "/etc/passwd", "/etc/group":
			if hdr.Typeflag != tar.TypeReg {
				return fmt.Errorf("%s is not a regular file", p)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return fmt.Errorf("read %s: %w", p, err)
			}
			if p == "/etc/passwd" {
				b.Passwd = data
			} else {
				b.Group = data
			}
		}
	}
}
