// Package manifest reads tt-model.yaml (schema "5.1") exactly as Tenstorrent's
// Python tt-model does, adds this tool's kind tt-go-server, resolves serve
// profiles, and reads and writes the wire tt_kernel_manifest.json.
//
// The steps are separate functions over one value, in the shape of
// go-containerregistry: decode (YAML nodes → Manifest, with positions),
// validate (the semantic rules), resolve (profile deep-merge), wire.
package manifest

import (
	"encoding/json"
	"fmt"
)

// SchemaVersion is the authored and published container schema.
const SchemaVersion = "5.1"

// DefaultProfileName names the profile synthesized from serve: when a
// manifest declares no serve_profiles.
const DefaultProfileName = "default"

// Manifest is an authored tt-model.yaml.
type Manifest struct {
	// File is the path the manifest was loaded from.
	File string `json:"-"`

	Schema           string         `json:"schema"`
	Repo             string         `json:"repo"`
	Name             string         `json:"name"`
	Weights          WeightsRef     `json:"weights"`
	AuxiliaryWeights []WeightsRef   `json:"auxiliary_weights,omitempty"`
	Kind             string         `json:"kind"`
	Arch             string         `json:"arch"`
	Source           Source         `json:"source"`
	Image            ImageSettings  `json:"image"`
	Runtime          map[string]any `json:"runtime,omitempty"`
	Serve            ServeSettings  `json:"serve"`
	ServeProfiles    []Profile      `json:"serve_profiles,omitempty"`
	DefaultProfile   string         `json:"default_profile,omitempty"`
	Card             *Card          `json:"card,omitempty"`
	Verify           []string       `json:"verify,omitempty"`

	// pos maps field paths ("serve_profiles[1].mesh_device") to where they
	// were written, so semantic errors can point at the line.
	pos positions
}

// WeightsRef points at a Hugging Face model repository, optionally pinned.
type WeightsRef struct {
	Repo           string   `json:"repo"`
	Revision       string   `json:"revision,omitempty"`
	AllowPatterns  []string `json:"allow_patterns,omitempty"`
	IgnorePatterns []string `json:"ignore_patterns,omitempty"`
}

// GitOrPath is a local path or a git repository at a ref.
type GitOrPath struct {
	Path string `json:"path,omitempty"`
	Repo string `json:"repo,omitempty"`
	Ref  string `json:"ref,omitempty"`
	SHA  string `json:"sha,omitempty"`
}

// IsGit reports whether the source is a {repo, ref} rather than a path.
func (g GitOrPath) IsGit() bool { return g.Repo != "" }

// String renders the source as a path or repo@ref.
func (g GitOrPath) String() string {
	if !g.IsGit() {
		return g.Path
	}
	ref := g.Ref
	if g.SHA != "" {
		ref = g.SHA
	}
	return g.Repo + "@" + ref
}

// ExtraCode is model code from outside the tt-metal tree.
type ExtraCode struct {
	Root  GitOrPath `json:"root"`
	Paths []string  `json:"paths"`
}

// Source holds the build-time inputs.
type Source struct {
	TTMetal   GitOrPath   `json:"tt_metal"`
	Code      []string    `json:"code"`
	ExtraCode []ExtraCode `json:"extra_code,omitempty"`
	Ubuntu    string      `json:"ubuntu"`
	Python    string      `json:"python"`
}

// ImageSettings says where the built image is published.
type ImageSettings struct {
	Registry   string `json:"registry"`
	Repository string `json:"repository,omitempty"`
}

// Capabilities are the tool/reasoning parsers passed to vLLM kinds.
type Capabilities struct {
	ToolParser      string `json:"tool_parser,omitempty"`
	ReasoningParser string `json:"reasoning_parser,omitempty"`
}

// ServeSettings are the launch settings every profile inherits from serve:.
type ServeSettings struct {
	Hardware         string            `json:"hardware,omitempty"`
	MeshDevice       string            `json:"mesh_device,omitempty"`
	Port             *int              `json:"port,omitempty"`
	MaxModelLen      *int              `json:"max_model_len,omitempty"`
	MaxNumSeqs       *int              `json:"max_num_seqs,omitempty"`
	BlockSize        *int              `json:"block_size,omitempty"`
	ServerTimeout    *int              `json:"server_timeout,omitempty"`
	Capabilities     *Capabilities     `json:"capabilities,omitempty"`
	AdditionalConfig map[string]any    `json:"additional_config,omitempty"`
	Args             []Arg             `json:"args,omitempty"`
	Env              map[string]string `json:"env,omitempty"`
}

// Profile is a named, launchable configuration.
type Profile struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	ServeSettings
}

// FlatArgs flattens args ([flag] or [flag, value]) into one argv fragment.
func (s ServeSettings) FlatArgs() []string {
	var out []string
	for _, a := range s.Args {
		out = append(out, a...)
	}
	return out
}

// License is the licence of the weights, as the Hub indexes it.
type License struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	Link string `json:"link,omitempty"`
}

// Card is the author-written model-card prose.
type Card struct {
	Description   string   `json:"description,omitempty"`
	Quickstart    string   `json:"quickstart,omitempty"`
	Architecture  string   `json:"architecture,omitempty"`
	Status        string   `json:"status,omitempty"`
	IntendedUse   string   `json:"intended_use,omitempty"`
	OutOfScopeUse string   `json:"out_of_scope_use,omitempty"`
	Usage         string   `json:"usage,omitempty"`
	Performance   string   `json:"performance,omitempty"`
	Limitations   string   `json:"limitations,omitempty"`
	Risks         string   `json:"risks,omitempty"`
	Licensing     string   `json:"licensing,omitempty"`
	Related       string   `json:"related,omitempty"`
	License       *License `json:"license,omitempty"`
	PipelineTag   string   `json:"pipeline_tag,omitempty"`
	BaseModel     []string `json:"base_model,omitempty"`
}

// Arg is one serve argument: a flag alone or a [flag, value] pair.
type Arg []string

// MarshalJSON writes a lone flag as a string and a pair as a list, as
// upstream authors them.
func (a Arg) MarshalJSON() ([]byte, error) {
	if len(a) == 1 {
		return json.Marshal(a[0])
	}
	return json.Marshal([]string(a))
}

// UnmarshalJSON reads a string, a number or a list of them.
func (a *Arg) UnmarshalJSON(data []byte) error {
	var items []any
	if err := json.Unmarshal(data, &items); err != nil {
		var one any
		if err := json.Unmarshal(data, &one); err != nil {
			return err
		}
		items = []any{one}
	}
	out := make(Arg, len(items))
	for i, it := range items {
		if s, ok := it.(string); ok {
			out[i] = s
		} else {
			out[i] = fmt.Sprint(it)
		}
	}
	*a = out
	return nil
}
