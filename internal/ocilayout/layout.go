package ocilayout

import (
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// RefName is the index.json annotation that names an image inside an OCI
// layout (skopeo's oci:DIR:NAME, umoci's --image DIR:NAME).
const RefName = "org.opencontainers.image.ref.name"

// Image opens the image named tag in the layout at dir; with tag "" the
// layout's only image. Anything but exactly one match is an error.
func Image(dir, tag string) (v1.Image, error) {
	return open(dir, tag, false)
}

// ImageOrOnly opens the image named tag in the layout at dir or, when no
// entry carries that name, the layout's only image.
func ImageOrOnly(dir, tag string) (v1.Image, error) {
	return open(dir, tag, true)
}

func open(dir, tag string, orOnly bool) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("read OCI layout %s: %w", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("read %s/index.json: %w", dir, err)
	}
	var images, named []v1.Descriptor
	for _, d := range im.Manifests {
		if !d.MediaType.IsImage() {
			continue
		}
		images = append(images, d)
		if tag != "" && d.Annotations[RefName] == tag {
			named = append(named, d)
		}
	}
	pick, what := images, "images"
	switch {
	case tag == "":
	case len(named) > 0 || !orOnly:
		pick, what = named, "images named "+tag
	default:
		what = "images (none named " + tag + ")"
	}
	if len(pick) != 1 {
		return nil, fmt.Errorf("%s: index.json lists %d %s, want 1", dir, len(pick), what)
	}
	img, err := idx.Image(pick[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("open image %s in %s: %w", pick[0].Digest, dir, err)
	}
	return img, nil
}

// WriteAtomic writes img as the only image of a new OCI layout at dir. The
// layout is written as dir.partial and renamed, so a reader never opens a
// half-written one; on failure nothing is left behind.
func WriteAtomic(dir string, img v1.Image) error {
	tmp := dir + ".partial"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("clear %s: %w", tmp, err)
	}
	p, err := layout.Write(tmp, empty.Index)
	if err == nil {
		err = p.AppendImage(img)
	}
	if err == nil {
		err = os.Rename(tmp, dir)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("write OCI layout %s: %w", dir, err)
	}
	return nil
}
