package oci

import (
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/ttmodel/tt-model/internal/ocilayout"
)

// Platform is the only platform this version builds.
var Platform = v1.Platform{OS: "linux", Architecture: "amd64"}

// WriteLayout writes img as the only image of a new OCI layout at dir, its
// index entry annotated with tag.
func WriteLayout(dir string, img v1.Image, tag string) error {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	p, err := layout.Write(dir, idx)
	if err != nil {
		return fmt.Errorf("create OCI layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{ocilayout.RefName: tag}),
		layout.WithPlatform(Platform)); err != nil {
		return fmt.Errorf("write image to %s: %w", dir, err)
	}
	// What was written is read back before the package is published: a
	// blob damaged on its way to disk is caught here, not by a registry.
	if err := ocilayout.VerifyBlobs(dir, nil); err != nil {
		return fmt.Errorf("check the written layout: %w", err)
	}
	return nil
}
