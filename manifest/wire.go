package manifest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/ttmodel/tt-model/internal/safename"
)

// WireFile is the name of the published manifest in a staged package.
const WireFile = "tt_kernel_manifest.json"

// readableSchemas are the wire schema versions this tool reads.
var readableSchemas = []string{"5", "5.1", "6"}

// Wire is the published tt_kernel_manifest.json.
type Wire struct {
	SchemaVersion    string        `json:"schema_version"`
	Name             string        `json:"name"`
	TTMetalVersion   string        `json:"tt_metal_version"`
	Arch             string        `json:"arch"`
	DeviceCount      int           `json:"device_count"`
	BuildKey         *string       `json:"build_key"`
	KernelCount      int           `json:"kernel_count"`
	FastPathKernels  any           `json:"fast_path_kernels"`
	Producer         Producer      `json:"producer"`
	Weights          *WireWeights  `json:"weights"`
	AuxiliaryWeights []WireWeights `json:"auxiliary_weights"`
	Container        *Container    `json:"container,omitempty"`

	// Extra keeps the top-level fields of other schemas (v5 bundled, v6
	// deps, …) so reading and writing back loses nothing.
	Extra map[string]json.RawMessage `json:"-"`
}

// Producer records who wrote the manifest.
type Producer struct {
	TTKernelVersion string `json:"tt_kernel_version"`
	CreatedAt       string `json:"created_at"`
	Hostname        string `json:"hostname,omitempty"`
}

// WireWeights is a weights pointer on the wire.
type WireWeights struct {
	Repo           string   `json:"repo"`
	Revision       *string  `json:"revision"`
	AllowPatterns  []string `json:"allow_patterns"`
	IgnorePatterns []string `json:"ignore_patterns"`
	RepoType       string   `json:"repo_type"`
}

// Ref converts to the authored form.
func (w WireWeights) Ref() WeightsRef {
	r := WeightsRef{Repo: w.Repo, AllowPatterns: w.AllowPatterns, IgnorePatterns: w.IgnorePatterns}
	if w.Revision != nil {
		r.Revision = *w.Revision
	}
	return r
}

// ImageRef says where the built image lives.
type ImageRef struct {
	Registry   string `json:"registry"`
	Repository string `json:"repository,omitempty"`
	Tag        string `json:"tag"`
	Digest     string `json:"digest,omitempty"`
}

// Container is the v5.1 block: the image and how to launch it.
type Container struct {
	Image          ImageRef       `json:"image"`
	Kind           string         `json:"kind"`
	Runtime        map[string]any `json:"runtime"`
	Serve          ServeSettings  `json:"serve"`
	ServeProfiles  []Profile      `json:"serve_profiles"`
	DefaultProfile string         `json:"default_profile,omitempty"`
	CodeDir        string         `json:"code_dir,omitempty"`
	Verify         []string       `json:"verify"`
	Built          map[string]any `json:"built"`
	Card           *Card          `json:"card,omitempty"`
}

// Profiles returns the published profiles (always at least one on the wire;
// a synthesized default for a hand-edited file that has none).
func (c *Container) Profiles() []Profile { return effectiveProfiles(c.ServeProfiles) }

// DefaultProfileName is default_profile, else the first profile.
func (c *Container) DefaultProfileName() string {
	return defaultProfileName(c.DefaultProfile, c.Profiles())
}

// ResolveProfile deep-merges the named profile ("" = default) over serve.
func (c *Container) ResolveProfile(name string) (Profile, error) {
	return resolveProfile(c.Serve, c.Profiles(), c.DefaultProfileName(), name)
}

// WireInfo is what package knows that the author does not.
type WireInfo struct {
	ImageTag       string
	Digest         string
	TTMetalVersion string
	ToolVersion    string
	CreatedAt      string
	Hostname       string
	Built          map[string]any
}

// ToWire renders the published manifest (schema 5.1).
func (m *Manifest) ToWire(info WireInfo) *Wire {
	chips := 1
	if def, err := m.ResolveProfile(""); err == nil {
		if n, ok := ChipCount(def.Hardware); ok && n > 0 {
			chips = n
		}
	}
	repository := m.Image.Repository
	if repository == "" {
		repository = m.Name
	}
	registry := m.Image.Registry
	if registry == "" {
		registry = "hf"
	}
	aux := make([]WireWeights, 0, len(m.AuxiliaryWeights))
	for _, w := range m.AuxiliaryWeights {
		aux = append(aux, wireWeights(w))
	}
	weights := wireWeights(m.Weights)
	built := info.Built
	if built == nil {
		built = map[string]any{}
	}
	runtime := m.Runtime
	if runtime == nil {
		runtime = map[string]any{}
	}
	return &Wire{
		SchemaVersion:    SchemaVersion,
		Name:             m.Name,
		TTMetalVersion:   info.TTMetalVersion,
		Arch:             m.Arch,
		DeviceCount:      chips,
		Producer:         Producer{TTKernelVersion: info.ToolVersion, CreatedAt: info.CreatedAt, Hostname: info.Hostname},
		Weights:          &weights,
		AuxiliaryWeights: aux,
		Container: &Container{
			Image:          ImageRef{Registry: registry, Repository: repository, Tag: info.ImageTag, Digest: info.Digest},
			Kind:           m.Kind,
			Runtime:        runtime,
			Serve:          m.Serve,
			ServeProfiles:  m.Profiles(),
			DefaultProfile: m.DefaultProfile,
			CodeDir:        "code",
			Verify:         nonNil(m.Verify),
			Built:          built,
			Card:           m.Card,
		},
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func wireWeights(w WeightsRef) WireWeights {
	out := WireWeights{Repo: w.Repo, AllowPatterns: w.AllowPatterns, IgnorePatterns: w.IgnorePatterns, RepoType: "model"}
	if w.Revision != "" {
		rev := w.Revision
		out.Revision = &rev
	}
	return out
}

// knownWireKeys are the top-level keys Wire decodes itself.
var knownWireKeys = []string{"schema_version", "name", "tt_metal_version", "arch", "device_count", "build_key",
	"kernel_count", "fast_path_kernels", "producer", "weights", "auxiliary_weights", "container"}

// MarshalJSON writes the known fields, then any extra ones, indented.
func (w *Wire) MarshalJSON() ([]byte, error) {
	type plain Wire
	base, err := json.Marshal((*plain)(w))
	if err != nil || len(w.Extra) == 0 {
		return base, err
	}
	var merged map[string]json.RawMessage
	if err := json.Unmarshal(base, &merged); err != nil {
		return nil, err
	}
	for k, v := range w.Extra {
		merged[k] = v
	}
	return json.Marshal(merged)
}

// UnmarshalJSON reads the known fields and keeps the rest in Extra.
func (w *Wire) UnmarshalJSON(data []byte) error {
	type plain Wire
	if err := json.Unmarshal(data, (*plain)(w)); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return err
	}
	for _, k := range knownWireKeys {
		delete(all, k)
	}
	if len(all) > 0 {
		w.Extra = all
	}
	return nil
}

// ParseWire decodes a published manifest and refuses unknown schemas.
func ParseWire(data []byte) (*Wire, error) {
	var w Wire
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, err
	}
	if !slices.Contains(readableSchemas, w.SchemaVersion) {
		return nil, fmt.Errorf("unsupported schema_version %q; this tt-model reads %v", w.SchemaVersion, readableSchemas)
	}
	if err := w.check(); err != nil {
		return nil, err
	}
	return &w, nil
}

// check applies the authored manifest's rules to the fields of a published
// one that name folders and files: a pulled package is someone else's file,
// and its name becomes ~/.cache/tt-model/<name>, its revisions refs/<rev>.
func (w *Wire) check() error {
	if !nameRE.MatchString(w.Name) {
		return fmt.Errorf("name: %q is not a safe slug: lowercase letters, digits and '.', '_', '-', starting alphanumeric (it names cache folders)", w.Name)
	}
	check := func(field string, ww *WireWeights) error {
		if ww == nil || ww.Revision == nil {
			return nil
		}
		if err := safename.Revision(*ww.Revision); err != nil {
			return fmt.Errorf("%s.revision: %w", field, err)
		}
		return nil
	}
	if err := check("weights", w.Weights); err != nil {
		return err
	}
	for i := range w.AuxiliaryWeights {
		if err := check(fmt.Sprintf("auxiliary_weights[%d]", i), &w.AuxiliaryWeights[i]); err != nil {
			return err
		}
	}
	return nil
}

// ReadWire reads tt_kernel_manifest.json from a file, or from a directory
// holding one (a staged package).
func ReadWire(path string) (*Wire, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, WireFile)
	}
	data, err := readRegular(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", path, err)
	}
	w, err := ParseWire(data)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return w, nil
}

// WriteFile writes the manifest as indented JSON.
func (w *Wire) WriteFile(path string) error {
	data, err := json.MarshalIndent(w, "", "  ")
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
