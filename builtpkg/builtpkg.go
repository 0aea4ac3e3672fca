// Package builtpkg is the noun the builder writes and everything after it
// reads: a built package, the folder `tt-model package` makes
// (build/<name>/ or a Hub snapshot of it) with its wire manifest
// (tt_kernel_manifest.json), its image (image/, an OCI layout), its code
// tree (code/) and its card (README.md). The builder stages one, push and
// pull carry one to and from the Hub or a registry, the runner serves one
// and kube renders one, all through this type rather than each joining the
// file names again. It sits below builder, runner and kube and above
// manifest, in the way v1.Image sits below go-containerregistry's mutate,
// remote and layout.
package builtpkg

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/ttmodel/tt-model/internal/ocilayout"
	"github.com/ttmodel/tt-model/manifest"
)

// The entries of a package folder.
const (
	WireFile  = manifest.WireFile // the wire manifest
	LayoutDir = "image"           // the OCI layout of the image
	CodeDir   = "code"            // the code tree the image carries
	CardFile  = "README.md"       // the model card
)

// Package is a built package: its folder and its wire manifest. Serve and
// weights pull also take an authored tt-model.yaml as one (Dir "", no
// image), read as the wire manifest it would publish.
type Package struct {
	Path string // the manifest file read
	Dir  string // the package folder; "" for an authored tt-model.yaml
	Wire *manifest.Wire
	// ImageDir, when set, is the package's OCI layout instead of Dir/image:
	// a package pulled from the Hub has its image/ in the HF cache as links,
	// which an OCI layout reader refuses, so it is served from a copy made of
	// hard links.
	ImageDir string
}

// At is the package folder dir before anything is read from it (the
// builder's staging directory): its paths, no manifest.
func At(dir string) *Package {
	return &Package{Path: filepath.Join(dir, WireFile), Dir: dir}
}

// Read reads the wire manifest of the package folder dir. The error is
// manifest.ReadWire's, for callers to put in their own words; a manifest
// without a container block is returned too (see IsContainer).
func Read(dir string) (*Package, error) {
	w, err := manifest.ReadWire(dir)
	if err != nil {
		return nil, err
	}
	p := At(dir)
	p.Wire = w
	return p, nil
}

// ReadFile reads a package's wire manifest from file, which may carry any
// name; the package folder is the one holding it.
func ReadFile(file string) (*Package, error) {
	w, err := manifest.ReadWire(file)
	if err != nil {
		return nil, err
	}
	return &Package{Path: file, Dir: filepath.Dir(file), Wire: w}, nil
}

// IsContainer says whether the manifest describes a container package (the
// 5.1 schema's container block), the only kind the tools build and serve.
func (p *Package) IsContainer() bool { return p.Wire != nil && p.Wire.Container != nil }

// CardPath is where the model card is.
func (p *Package) CardPath() string { return filepath.Join(p.Dir, CardFile) }

// CodeTree is the folder of the code tree.
func (p *Package) CodeTree() string { return filepath.Join(p.Dir, CodeDir) }

// LayoutPath is where the package's OCI layout is or is to be written:
// ImageDir when set, else Dir/image.
func (p *Package) LayoutPath() string {
	if p.ImageDir != "" {
		return p.ImageDir
	}
	return filepath.Join(p.Dir, LayoutDir)
}

// ImageLayout is the package's OCI layout folder, or "" when it has none
// (an authored manifest, or an image that lives in a registry).
func (p *Package) ImageLayout() string {
	if p.ImageDir != "" {
		return p.ImageDir
	}
	if p.Dir == "" {
		return ""
	}
	dir := p.LayoutPath()
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return ""
	}
	return dir
}

// Tag is the image tag the manifest records ("" when none).
func (p *Package) Tag() string {
	if !p.IsContainer() {
		return ""
	}
	return p.Wire.Container.Image.Tag
}

// Image opens the image of the package's layout: the entry named by the
// recorded tag or, when none carries that name, the layout's only image.
func (p *Package) Image() (v1.Image, error) {
	return ocilayout.ImageOrOnly(p.ImageLayout(), p.Tag())
}

// WeightRefs are the primary and auxiliary weights, in that order.
func (p *Package) WeightRefs() []manifest.WeightsRef {
	var refs []manifest.WeightsRef
	if p.Wire.Weights != nil && p.Wire.Weights.Repo != "" {
		refs = append(refs, p.Wire.Weights.Ref())
	}
	for _, w := range p.Wire.AuxiliaryWeights {
		if w.Repo != "" {
			refs = append(refs, w.Ref())
		}
	}
	return refs
}

// Launch resolves a profile ("" = default) to the server's argv, env, port
// and readiness probe.
func (p *Package) Launch(profile string) (manifest.Profile, manifest.Launch, error) {
	prof, err := p.Wire.Container.ResolveProfile(profile)
	if err != nil {
		return manifest.Profile{}, manifest.Launch{}, err
	}
	repo := ""
	if p.Wire.Weights != nil {
		repo = p.Wire.Weights.Repo
	}
	l, err := manifest.LaunchFor(p.Wire.Container.Kind, p.Wire.Container.Runtime, repo, prof)
	if err != nil {
		return prof, manifest.Launch{}, fmt.Errorf("%s profile %s: %w", p.Path, prof.Name, err)
	}
	return prof, l, nil
}
