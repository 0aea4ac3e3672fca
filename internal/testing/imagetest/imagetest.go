// Package imagetest holds what the tests' hand-made images share: every one
// targets linux/amd64, the only platform the builder makes and the runner
// starts.
package imagetest

import (
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Linux returns img as a linux/amd64 image with edit applied to a copy of
// its config file (edit may be nil).
func Linux(img v1.Image, edit func(*v1.ConfigFile)) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read the image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	if edit != nil {
		edit(cf)
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("write the image config: %w", err)
	}
	return img, nil
}
