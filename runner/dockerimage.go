package runner

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/internal/engine"
	"github.com/ttmodel/tt-model/manifest"
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
		_, err := d.c.ImageInspect(ctx, ref.Tag)
		if err == nil {
			return ref.Tag, nil
		}
		pull := RegistryImage(ref, pkg.Wire.Name)
		if !cerrdefs.IsNotFound(err) || pull == "" {
			return "", fmt.Errorf("%s: no image/ OCI layout beside the manifest, and the engine has no %s: %w", pkg.Path, ref.Tag, err)
		}
		if err := d.pullImage(ctx, pull, ref.Tag, progress); err != nil {
			return "", fmt.Errorf("%s: the image lives in a registry: %w", pkg.Path, err)
		}
		return ref.Tag, nil
	}
	img, err := pkg.Image()
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

// RegistryImage is the reference a package pushed with --registry names its image by in the
// registry: HOST/NAMESPACE/REPOSITORY@DIGEST (the repository defaults to the package name, as
// push names it), or "" when the image is not in a registry (image.registry unset or "hf", the
// image riding in the Hub repo) or no digest is recorded (a tag could have moved).
func RegistryImage(ref manifest.ImageRef, name string) string {
	registry := strings.TrimSuffix(ref.Registry, "/")
	if registry == "" || registry == "hf" || ref.Digest == "" {
		return ""
	}
	repository := ref.Repository
	if repository == "" {
		repository = name
	}
	return registry + "/" + repository + "@" + ref.Digest
}

// pullImage has the engine pull ref (by digest: the content is the one the manifest records) and
// tags it as tag, the name the containers of the package run. The engine applies its own registry
// settings (insecure registries, mirrors); the credentials are the user's, from the Docker config
// and credential helpers (the default keychain `push` uses), as `docker pull` sends them.
func (d *Docker) pullImage(ctx context.Context, ref, tag string, progress io.Writer) error {
	auth, err := registryAuth(ref)
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "pulling %s through the Docker engine\n", ref)
	resp, err := d.c.ImagePull(ctx, ref, client.ImagePullOptions{RegistryAuth: auth})
	if err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	if err := resp.Wait(ctx); err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	if _, err := d.c.ImageTag(ctx, client.ImageTagOptions{Source: ref, Target: tag}); err != nil {
		return fmt.Errorf("tag %s as %s: %w", ref, tag, err)
	}
	fmt.Fprintf(progress, "tagged %s as %s\n", ref, tag)
	return nil
}

// registryAuth is the X-Registry-Auth of a pull of ref: the keychain's credentials for its
// registry, base64url JSON as the engine reads it; "" when the keychain has none (anonymous).
func registryAuth(ref string) (string, error) {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", fmt.Errorf("image reference %s: %w", ref, err)
	}
	reg := r.Context().Registry
	a, err := authn.DefaultKeychain.Resolve(reg)
	if err != nil {
		return "", fmt.Errorf("credentials for %s: %w", reg.RegistryStr(), err)
	}
	c, err := a.Authorization()
	if err != nil {
		return "", fmt.Errorf("credentials for %s: %w", reg.RegistryStr(), err)
	}
	if *c == (authn.AuthConfig{}) {
		return "", nil
	}
	b, err := json.Marshal(registry.AuthConfig{Username: c.Username, Password: c.Password, Auth: c.Auth,
		IdentityToken: c.IdentityToken, RegistryToken: c.RegistryToken, ServerAddress: reg.RegistryStr()})
	if err != nil {
		return "", err
	}
	return base64.URLEncoding.EncodeToString(b), nil
}
