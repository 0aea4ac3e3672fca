package manifest

import (
	"fmt"
	"os"
)

// Options tune Load.
type Options struct {
	// CheckSources also requires every local source path to exist.
	CheckSources bool
	// WorkDir resolves relative source roots; "" means the process's
	// working directory, as upstream does.
	WorkDir string
}

// Load reads, decodes and validates a tt-model.yaml. A file that cannot be
// read is a *ReadError; a manifest that breaks rules is an ErrorList with
// every problem found.
func Load(path string, opts Options) (*Manifest, error) {
	data, err := readRegular(path)
	if err != nil {
		return nil, &ReadError{File: path, Err: err}
	}
	m, errs := Decode(path, data)
	if m == nil {
		return nil, errs
	}
	m.File = path
	errs = append(errs, Validate(m)...)
	if opts.CheckSources {
		wd := opts.WorkDir
		if wd == "" {
			if wd, err = os.Getwd(); err != nil {
				return nil, fmt.Errorf("check sources of %s: %w", path, err)
			}
		}
		errs = append(errs, CheckSources(m, wd)...)
	}
	if len(errs) > 0 {
		return m, errs.sorted()
	}
	return m, nil
}
