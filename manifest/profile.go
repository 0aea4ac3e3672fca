package manifest

import (
	"fmt"
	"maps"
	"strings"
)

// Profiles returns the declared profiles, or one named "default" synthesized
// from serve: when none are declared, so a flat manifest and a one-profile
// manifest are the same thing downstream.
func (m *Manifest) Profiles() []Profile { return effectiveProfiles(m.ServeProfiles) }

// DefaultProfileName is default_profile, else the first profile's name.
func (m *Manifest) DefaultProfileName() string {
	return defaultProfileName(m.DefaultProfile, m.Profiles())
}

// ResolveProfile deep-merges the named profile ("" = the default) over serve:.
func (m *Manifest) ResolveProfile(name string) (Profile, error) {
	return resolveProfile(m.Serve, m.Profiles(), m.DefaultProfileName(), name)
}

func effectiveProfiles(declared []Profile) []Profile {
	if len(declared) > 0 {
		return declared
	}
	return []Profile{{Name: DefaultProfileName}}
}

func defaultProfileName(declared string, profiles []Profile) string {
	if declared != "" {
		return declared
	}
	if len(profiles) == 0 {
		return ""
	}
	return profiles[0].Name
}

func resolveProfile(base ServeSettings, profiles []Profile, def, name string) (Profile, error) {
	if name == "" {
		name = def
	}
	names := make([]string, 0, len(profiles))
	for _, p := range profiles {
		if p.Name == name {
			return Profile{Name: p.Name, Description: p.Description, ServeSettings: mergeServe(base, p.ServeSettings)}, nil
		}
		names = append(names, p.Name)
	}
	return Profile{}, fmt.Errorf("no serve profile named %q; available: %s", name, strings.Join(names, ", "))
}

// mergeServe puts over on top of base with upstream's _deep_merge rules:
// mappings merge recursively, other set values override, and an empty list or
// mapping in the profile does not wipe the inherited value.
func mergeServe(base, over ServeSettings) ServeSettings {
	out := base
	out.Hardware = pick(base.Hardware, over.Hardware)
	out.MeshDevice = pick(base.MeshDevice, over.MeshDevice)
	out.Port = pickInt(base.Port, over.Port)
	out.MaxModelLen = pickInt(base.MaxModelLen, over.MaxModelLen)
	out.MaxNumSeqs = pickInt(base.MaxNumSeqs, over.MaxNumSeqs)
	out.BlockSize = pickInt(base.BlockSize, over.BlockSize)
	out.ServerTimeout = pickInt(base.ServerTimeout, over.ServerTimeout)
	if over.Capabilities != nil {
		c := Capabilities{}
		if base.Capabilities != nil {
			c = *base.Capabilities
		}
		c.ToolParser = pick(c.ToolParser, over.Capabilities.ToolParser)
		c.ReasoningParser = pick(c.ReasoningParser, over.Capabilities.ReasoningParser)
		out.Capabilities = &c
	} else if base.Capabilities != nil {
		c := *base.Capabilities
		out.Capabilities = &c
	}
	out.AdditionalConfig = deepMerge(base.AdditionalConfig, over.AdditionalConfig)
	if len(over.Args) > 0 {
		out.Args = over.Args
	}
	if base.Env != nil || over.Env != nil {
		env := maps.Clone(base.Env)
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, over.Env)
		out.Env = env
	}
	return out
}

func pick(base, over string) string {
	if over != "" {
		return over
	}
	return base
}

func pickInt(base, over *int) *int {
	if over != nil {
		return over
	}
	return base
}

// deepMerge merges over onto base: maps recurse, everything else overrides
// unless it is nil or an empty list or map.
func deepMerge(base, over map[string]any) map[string]any {
	if base == nil && over == nil {
		return nil
	}
	out := make(map[string]any, len(base)+len(over))
	maps.Copy(out, base)
	for k, v := range over {
		vm, vIsMap := v.(map[string]any)
		bm, bIsMap := out[k].(map[string]any)
		switch {
		case vIsMap && bIsMap:
			out[k] = deepMerge(bm, vm)
		case isEmptyValue(v):
		default:
			out[k] = v
		}
	}
	return out
}

func isEmptyValue(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case []any:
		return len(t) == 0
	case map[string]any:
		return len(t) == 0
	}
	return false
}
