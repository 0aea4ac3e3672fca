// Package runner starts, stops, lists and follows model servers built by
// `tt-model package`, behind one interface with two implementations (in the
// shape of ko's publishers): the Docker engine and the bare host.
package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ttmodel/tt-model/builtpkg"
	"github.com/ttmodel/tt-model/manifest"
)

// Package is what serve and weights pull operate on: a built package
// (build/<name>/ with tt_kernel_manifest.json and image/) or, for weights
// only, an authored tt-model.yaml. Both are read as the wire manifest.
type Package = builtpkg.Package

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
		for _, name := range []string{builtpkg.WireFile, "tt-model.yaml", "tt-model.yml"} {
			if _, err := os.Stat(filepath.Join(path, name)); err == nil {
				file = filepath.Join(path, name)
				break
			}
		}
		if file == "" {
			return nil, &manifest.ReadError{File: path, Err: fmt.Errorf("no %s or tt-model.yaml in this folder", builtpkg.WireFile)}
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
	pkg, err := builtpkg.ReadFile(file)
	if err != nil {
		return nil, &manifest.ReadError{File: file, Err: err}
	}
	if !pkg.IsContainer() {
		return nil, &manifest.ReadError{File: file, Err: fmt.Errorf("schema %s has no container block: not a container package", pkg.Wire.SchemaVersion)}
	}
	return pkg, nil
}
