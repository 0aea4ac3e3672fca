package runner

import (
	"context"
	"fmt"
	"io"

	cerrdefs "github.com/containerd/errdefs"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/ttmodel/tt-model/internal/engine"
)

// refNameAnnotation names an image inside an OCI layout's index.json.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// ensureImage makes the package's image present in the engine under its
// tag, loading it from the package's image/ layout when the engine lacks it
// or holds a different image under that tag (an engine image id is the
// config digest on the classic store and the manifest digest on the
// containerd store; either matching counts).
func (d *Docker) ensureImage(ctx context.Context, pkg *Package, progress io.Writer) (string, error) {
	ref := pkg.Wire.Container.Image
	dir := pkg.ImageLayout()
	if dir == "" {
		if ref.Tag == "" {
			return "", fmt.Errorf("%s: no image/ OCI layout beside the manifest and no image tag recorded: run tt-model package first", pkg.Path)
		}
		if _, err := d.c.ImageInspect(ctx, ref.Tag); err != nil {
			return "", fmt.Errorf("%s: no image/ OCI layout beside the manifest, and the engine has no %s: %w", pkg.Path, ref.Tag, err)
		}
		return ref.Tag, nil
	}
	img, err := layoutImage(dir, ref.Tag)
	if err != nil {
		return "", err
	}
	cfg, err := img.ConfigName()
	if err != nil {
		return "", fmt.Errorf("image config of %s: %w", dir, err)
	}
	manifestDigest, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("image digest of %s: %w", dir, err)
	}
	tag := ref.Tag
	if tag == "" {
		tag = fmt.Sprintf("tt-model/%s:%s", pkg.Wire.Name, manifestDigest.Hex[:12])
	}
	have, err := d.c.ImageInspect(ctx, tag)
	switch {
	case err == nil && (have.ID == cfg.String() || have.ID == manifestDigest.String()):
		return tag, nil
	case err == nil:
		fmt.Fprintf(progress, "%s in the engine is another image (%s); loading the package's (%s)\n", tag, shortID(have.ID), manifestDigest)
	case cerrdefs.IsNotFound(err):
		fmt.Fprintf(progress, "loading %s into the Docker engine from %s\n", tag, dir)
	default:
		return "", fmt.Errorf("inspect image %s: %w", tag, err)
	}
	if err := engine.Load(ctx, d.c, tag, img); err != nil {
		return "", err
	}
	return tag, nil
}

// layoutImage opens the image named tag in an OCI layout, or its only image.
func layoutImage(dir, tag string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("read OCI layout %s: %w", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("read %s/index.json: %w", dir, err)
	}
	var images, named []v1.Descriptor
	for _, desc := range im.Manifests {
		if !desc.MediaType.IsImage() {
			continue
		}
		images = append(images, desc)
		if tag != "" && desc.Annotations[refNameAnnotation] == tag {
			named = append(named, desc)
		}
	}
	pick := named
	if len(pick) == 0 {
		pick = images
	}
	if len(pick) != 1 {
		return nil, fmt.Errorf("%s: want one image (named %q), index.json lists %d", dir, tag, len(pick))
	}
	img, err := idx.Image(pick[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("open image %s in %s: %w", pick[0].Digest, dir, err)
	}
	return img, nil
}
