package runner

import (
	"context"
	"fmt"
	"io"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/ttmodel/tt-model/internal/engine"
	"github.com/ttmodel/tt-model/internal/ocilayout"
)

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
	img, err := ocilayout.ImageOrOnly(dir, ref.Tag)
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
