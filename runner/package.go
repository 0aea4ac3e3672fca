// Package runner starts, stops, lists and follows model servers built by
// `tt-model package`, behind one interface with two implementations (in the
// shape of ko's publishers): the Docker engine and the bare host.
package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ttmodel/tt-model/manifest"
)

// Package is what serve and weights pull operate on: a staged package
// (build/<name>/ with tt_kernel_manifest.json and image/) or, for weights
// only, an authored tt-model.yaml. Both are read as the wire manifest.
type Package struct {
	Path string // the manifest file read
	Dir  string // the staged package folder; "" for an authored tt-model.yaml
	Wire *manifest.Wire
	// ImageDir, when set, is the package's OCI layout instead of Dir/image:
	// a package pulled from the Hub has its image/ in the HF cache as links,
	// which an OCI layout reader refuses, so it is served from a copy made of
	// hard links (see FetchPackage).
	ImageDir string
}

// LoadPackage reads MANIFEST|DIR: a tt_kernel_manifest.json, a tt-model.yaml,
// or a folder holding one of them (the published one first). Errors from an
// authored manifest are returned unchanged (*manifest.ReadError or
// manifest.ErrorList) so callers can map them to exit codes.
func LoadPackage(path string) (*Package, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, &manifest.ReadError{File: path, Err: err}
	}
	file := path
	if st.IsDir() {
		file = ""
		for _, name := range []string{manifest.WireFile, "tt-model.yaml", "tt-model.yml"} {
			if _, err := os.Stat(filepath.Join(path, name)); err == nil {
				file = filepath.Join(path, name)
				break
			}
		}
		if file == "" {
			return nil, &manifest.ReadError{File: path, Err: fmt.Errorf("no %s or tt-model.yaml in this folder", manifest.WireFile)}
		}
	}
	ext := strings.ToLower(filepath.Ext(file))
	if ext == ".yaml" || ext == ".yml" {
		m, err := manifest.Load(file, manifest.Options{})
		if err != nil {
			return nil, err
		}
		return &Package{Path: file, Wire: m.ToWire(manifest.WireInfo{})}, nil
	}
	w, err := manifest.ReadWire(file)
	if err != nil {
		return nil, &manifest.ReadError{File: file, Err: err}
	}
	if w.Container == nil {
		return nil, &manifest.ReadError{File: file, Err: fmt.Errorf("schema %s has no container block: not a container package", w.SchemaVersion)}
	}
	return &Package{Path: file, Dir: filepath.Dir(file), Wire: w}, nil
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

// ImageLayout is the package's OCI layout folder, or "" when it has none.
func (p *Package) ImageLayout() string {
	if p.ImageDir != "" {
		return p.ImageDir
	}
	if p.Dir == "" {
		return ""
	}
	dir := filepath.Join(p.Dir, "image")
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return ""
	}
	return dir
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
