package builder

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/internal/engine"
	"github.com/ttmodel/tt-model/internal/ocilayout"
)

// engineImageID is the id of image ref in the engine, ok=false when the
// engine does not hold it.
func engineImageID(ctx context.Context, c *client.Client, ref string) (string, bool, error) {
	res, err := c.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("inspect %s in the Docker engine: %w", ref, err)
	}
	return res.ID, true, nil
}

// imageFromEngine opens image ref held by a reachable engine (ok=false when
// no engine answers or it has no such image; absent says which, for an
// error that follows). The engine's copy is saved
// once into an OCI layout under the user's cache, keyed by the engine's
// image id, so the next build reads files instead of exporting gigabytes.
func imageFromEngine(ctx context.Context, ref, scratch string) (img v1.Image, ok bool, absent string, err error) {
	c, err := engine.Connect(ctx)
	if err != nil {
		return nil, false, fmt.Sprintf("no Docker engine to look in (%v)", err), nil
	}
	defer c.Close()
	id, ok, err := engineImageID(ctx, c, ref)
	if !ok || err != nil {
		return nil, false, "not in the Docker engine", err
	}
	cacheDir, cacheErr := baseCacheDir(id)
	if cacheErr == nil {
		if img, err := imageFromLayout(cacheDir); err == nil {
			now := time.Now()
			_ = os.Chtimes(cacheDir, now, now) // used: keep it past the next prune
			return img, true, "", nil
		}
	}
	// By id: the engine may hold the name normalised differently.
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return nil, false, "", err
	}
	img, err = engine.Save(ctx, c, id, scratch)
	if err != nil {
		return nil, false, "", err
	}
	if cacheErr != nil {
		return img, true, "", nil
	}
	// Written under a temporary name and renamed, so a half-written cache
	// is never read. The cache is an optimisation: on any failure the
	// engine's copy is used.
	// Kept with OCI media types, as the builder uses a base: converting a
	// Docker-typed layout image at every build costs seconds.
	typed, err := toOCI(img)
	if err == nil {
		err = ocilayout.WriteAtomic(cacheDir, typed)
	}
	if err != nil {
		return img, true, "", nil
	}
	pruneCache(filepath.Dir(cacheDir))
	if cached, err := imageFromLayout(cacheDir); err == nil {
		return cached, true, "", nil
	}
	return img, true, "", nil
}

// baseCacheDir is where an engine image is kept as an OCI layout.
func baseCacheDir(id string) (string, error) {
	h, err := v1.NewHash(id)
	if err != nil {
		return "", err
	}
	root := userCacheDir("bases")
	if root == "" {
		return "", fmt.Errorf("no user cache folder")
	}
	return filepath.Join(root, h.Hex), nil
}

// engineBase makes the base of an engine build available to the engine and
// returns the name a Dockerfile's FROM gives it and its digest: an image the
// engine holds as itself (digest: its id); a file, layout or registry image
// loaded as tt-model-base:<digest> unless the engine has it already.
func engineBase(ctx context.Context, c *client.Client, field, ref, at string, p *progress) (from, digest, note string, err error) {
	if !isLocalPathRef("", at) {
		if id, ok, err := engineImageID(ctx, c, ref); err != nil {
			return "", "", "", err
		} else if ok {
			return ref, id, "", nil
		}
	}
	img, err := openBase(ctx, at, "", "")
	if err != nil {
		return "", "", "", fmt.Errorf("%s %q: %w", field, ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", "", "", fmt.Errorf("%s %q: %w", field, ref, err)
	}
	cfg, err := img.ConfigName()
	if err != nil {
		return "", "", "", fmt.Errorf("%s %q: %w", field, ref, err)
	}
	tag := "tt-model-base:" + shortHex(d.Hex)
	note = fmt.Sprintf("FROM names the base %s as tt-model loads it into the engine.", ref)
	if id, ok, err := engineImageID(ctx, c, tag); err != nil {
		return "", "", "", err
	} else if ok && (id == cfg.String() || id == d.String()) {
		return tag, d.String(), note, nil
	}
	p.stage("loading the base %s into the Docker engine as %s", ref, tag)
	if err := engine.Load(ctx, c, tag, img); err != nil {
		return "", "", "", fmt.Errorf("%s %q: %w", field, ref, err)
	}
	return tag, d.String(), note, nil
}
