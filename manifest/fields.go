package manifest

import "go.yaml.in/yaml/v3"

// The field tables below are the authored schema: one table per type, and a
// key missing from its table is an unknown key, which is refused.

func (d *decoder) manifest(n *yaml.Node, m *Manifest) {
	d.mapping(n, "", map[string]fieldFunc{
		"schema":            func(v *yaml.Node, p string) { d.str(v, p, &m.Schema) },
		"repo":              func(v *yaml.Node, p string) { d.str(v, p, &m.Repo) },
		"name":              func(v *yaml.Node, p string) { d.str(v, p, &m.Name) },
		"weights":           func(v *yaml.Node, p string) { d.weights(v, p, &m.Weights) },
		"auxiliary_weights": func(v *yaml.Node, p string) { d.auxWeights(v, p, m) },
		"kind":              func(v *yaml.Node, p string) { d.str(v, p, &m.Kind) },
		"arch":              func(v *yaml.Node, p string) { d.str(v, p, &m.Arch) },
		"source":            func(v *yaml.Node, p string) { d.source(v, p, &m.Source) },
		"image":             func(v *yaml.Node, p string) { d.image(v, p, &m.Image) },
		"runtime":           func(v *yaml.Node, p string) { d.freeMap(v, p, &m.Runtime) },
		"serve":             func(v *yaml.Node, p string) { d.serve(v, p, &m.Serve, nil) },
		"serve_profiles":    func(v *yaml.Node, p string) { d.profiles(v, p, m) },
		"default_profile":   func(v *yaml.Node, p string) { d.str(v, p, &m.DefaultProfile) },
		"card":              func(v *yaml.Node, p string) { d.card(v, p, m) },
		"verify":            func(v *yaml.Node, p string) { d.strList(v, p, &m.Verify) },
	})
	if m.Schema == "" {
		// Upstream defaults the authored schema to the current one.
		m.Schema = SchemaVersion
	}
}

// weights decodes the two forms: "org/name" or {repo, revision?, allow_patterns?, ignore_patterns?}.
func (d *decoder) weights(n *yaml.Node, path string, w *WeightsRef) {
	n = resolveAlias(n)
	if n != nil && n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		w.Repo = n.Value
		return
	}
	if n == nil || n.Kind != yaml.MappingNode {
		d.addAt(nodePos(n), path, `must be a Hub id "org/name" or {repo, revision, allow_patterns, ignore_patterns}, got %s`, describe(n))
		return
	}
	d.mapping(n, path, map[string]fieldFunc{
		"repo":            func(v *yaml.Node, p string) { d.str(v, p, &w.Repo) },
		"revision":        func(v *yaml.Node, p string) { d.str(v, p, &w.Revision) },
		"allow_patterns":  func(v *yaml.Node, p string) { d.strList(v, p, &w.AllowPatterns) },
		"ignore_patterns": func(v *yaml.Node, p string) { d.strList(v, p, &w.IgnorePatterns) },
	})
	if w.Repo == "" {
		d.addAt(nodePos(n), joinPath(path, "repo"), "is required")
	}
}

func (d *decoder) auxWeights(n *yaml.Node, path string, m *Manifest) {
	d.list(n, path, func(item *yaml.Node, p string) {
		var w WeightsRef
		d.weights(item, p, &w)
		m.AuxiliaryWeights = append(m.AuxiliaryWeights, w)
	})
}

// gitOrPath decodes a local path string or a {repo, ref, sha?} mapping.
func (d *decoder) gitOrPath(n *yaml.Node, path string, g *GitOrPath) {
	n = resolveAlias(n)
	if n != nil && n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		g.Path = n.Value
		return
	}
	if n == nil || n.Kind != yaml.MappingNode {
		d.addAt(nodePos(n), path, "must be a local path or {repo, ref}, got %s", describe(n))
		return
	}
	d.mapping(n, path, map[string]fieldFunc{
		"repo": func(v *yaml.Node, p string) { d.str(v, p, &g.Repo) },
		"ref":  func(v *yaml.Node, p string) { d.str(v, p, &g.Ref) },
		"sha":  func(v *yaml.Node, p string) { d.str(v, p, &g.SHA) },
	})
	for field, val := range map[string]string{"repo": g.Repo, "ref": g.Ref} {
		if val == "" {
			d.addAt(nodePos(n), joinPath(path, field), "is required")
		}
	}
}

func (d *decoder) source(n *yaml.Node, path string, s *Source) {
	seen := map[string]bool{}
	mark := func(key string, f fieldFunc) fieldFunc {
		return func(v *yaml.Node, p string) { seen[key] = true; f(v, p) }
	}
	if !d.mapping(n, path, map[string]fieldFunc{
		"tt_metal":   mark("tt_metal", func(v *yaml.Node, p string) { d.gitOrPath(v, p, &s.TTMetal) }),
		"code":       mark("code", func(v *yaml.Node, p string) { d.strList(v, p, &s.Code) }),
		"extra_code": mark("extra_code", func(v *yaml.Node, p string) { d.extraCode(v, p, s) }),
		"ubuntu":     mark("ubuntu", func(v *yaml.Node, p string) { d.str(v, p, &s.Ubuntu) }),
		"python":     mark("python", func(v *yaml.Node, p string) { d.str(v, p, &s.Python) }),
	}) {
		return
	}
	for _, req := range []string{"tt_metal", "code", "ubuntu", "python"} {
		if !seen[req] {
			d.addAt(nodePos(n), joinPath(path, req), "is required")
		}
	}
}

func (d *decoder) extraCode(n *yaml.Node, path string, s *Source) {
	d.list(n, path, func(item *yaml.Node, p string) {
		var e ExtraCode
		hasRoot, hasPaths := false, false
		if !d.mapping(item, p, map[string]fieldFunc{
			"root":  func(v *yaml.Node, q string) { hasRoot = true; d.gitOrPath(v, q, &e.Root) },
			"paths": func(v *yaml.Node, q string) { hasPaths = true; d.strList(v, q, &e.Paths) },
		}) {
			return
		}
		if !hasRoot {
			d.addAt(nodePos(item), joinPath(p, "root"), "is required")
		}
		if !hasPaths {
			d.addAt(nodePos(item), joinPath(p, "paths"), "is required")
		}
		s.ExtraCode = append(s.ExtraCode, e)
	})
}

func (d *decoder) image(n *yaml.Node, path string, im *ImageSettings) {
	d.mapping(n, path, map[string]fieldFunc{
		"registry":   func(v *yaml.Node, p string) { d.str(v, p, &im.Registry) },
		"repository": func(v *yaml.Node, p string) { d.str(v, p, &im.Repository) },
	})
}

// freeMap decodes a free-form mapping (runtime, additional_config); null
// leaves it unset.
func (d *decoder) freeMap(n *yaml.Node, path string, dst *map[string]any) {
	if isNull(n) {
		return
	}
	v, ok := d.anyValue(n, path).(map[string]any)
	if !ok {
		d.addAt(nodePos(n), path, "must be a mapping, got %s", describe(n))
		return
	}
	*dst = v
}

// serve decodes ServeSettings; with prof non-nil it also takes name and description.
func (d *decoder) serve(n *yaml.Node, path string, s *ServeSettings, prof *Profile) {
	fields := map[string]fieldFunc{
		"hardware":          func(v *yaml.Node, p string) { d.str(v, p, &s.Hardware) },
		"mesh_device":       func(v *yaml.Node, p string) { d.str(v, p, &s.MeshDevice) },
		"port":              func(v *yaml.Node, p string) { d.integer(v, p, &s.Port) },
		"max_model_len":     func(v *yaml.Node, p string) { d.integer(v, p, &s.MaxModelLen) },
		"max_num_seqs":      func(v *yaml.Node, p string) { d.integer(v, p, &s.MaxNumSeqs) },
		"block_size":        func(v *yaml.Node, p string) { d.integer(v, p, &s.BlockSize) },
		"server_timeout":    func(v *yaml.Node, p string) { d.integer(v, p, &s.ServerTimeout) },
		"capabilities":      func(v *yaml.Node, p string) { d.capabilities(v, p, s) },
		"additional_config": func(v *yaml.Node, p string) { d.freeMap(v, p, &s.AdditionalConfig) },
		"args":              func(v *yaml.Node, p string) { d.args(v, p, s) },
		"env":               func(v *yaml.Node, p string) { d.stringMap(v, p, &s.Env) },
	}
	if prof != nil {
		fields["name"] = func(v *yaml.Node, p string) { d.str(v, p, &prof.Name) }
		fields["description"] = func(v *yaml.Node, p string) { d.str(v, p, &prof.Description) }
	}
	if isNull(n) && prof == nil {
		return
	}
	d.mapping(n, path, fields)
}

// capabilities decodes serve.capabilities (the engine's tool and reasoning parsers).
func (d *decoder) capabilities(n *yaml.Node, path string, s *ServeSettings) {
	if isNull(n) {
		return
	}
	c := &Capabilities{}
	d.mapping(n, path, map[string]fieldFunc{
		"tool_parser":      func(v *yaml.Node, p string) { d.str(v, p, &c.ToolParser) },
		"reasoning_parser": func(v *yaml.Node, p string) { d.str(v, p, &c.ReasoningParser) },
	})
	s.Capabilities = c
}

// args decodes a list whose items are a scalar (a flag) or a list of scalars
// ([flag, value]); scalars are rendered as strings, as upstream's flat_args does.
func (d *decoder) args(n *yaml.Node, path string, s *ServeSettings) {
	d.list(n, path, func(item *yaml.Node, p string) {
		item = resolveAlias(item)
		switch item.Kind {
		case yaml.ScalarNode:
			s.Args = append(s.Args, Arg{scalarText(item)})
		case yaml.SequenceNode:
			var pair Arg
			for i, x := range item.Content {
				x = resolveAlias(x)
				if x.Kind != yaml.ScalarNode {
					d.addAt(nodePos(x), indexPath(p, i), "must be a string, got %s", describe(x))
					continue
				}
				pair = append(pair, scalarText(x))
			}
			s.Args = append(s.Args, pair)
		default:
			d.addAt(nodePos(item), p, "must be a string or a [flag, value] pair, got %s", describe(item))
		}
	})
}

// scalarText renders a scalar as Python's str() would for the common cases.
func scalarText(n *yaml.Node) string {
	switch n.Tag {
	case "!!null":
		return "None"
	case "!!bool":
		var b bool
		if n.Decode(&b) == nil && b {
			return "True"
		}
		return "False"
	}
	return n.Value
}

func (d *decoder) profiles(n *yaml.Node, path string, m *Manifest) {
	d.list(n, path, func(item *yaml.Node, p string) {
		var prof Profile
		hasName := false
		d.serve(item, p, &prof.ServeSettings, &prof)
		if resolveAlias(item).Kind == yaml.MappingNode {
			for _, kv := range mappingPairs(resolveAlias(item)) {
				if kv[0].Value == "name" {
					hasName = true
				}
			}
			if !hasName {
				d.addAt(nodePos(item), joinPath(p, "name"), "is required")
			}
		}
		m.ServeProfiles = append(m.ServeProfiles, prof)
	})
}

func (d *decoder) card(n *yaml.Node, path string, m *Manifest) {
	if isNull(n) {
		return
	}
	c := &Card{}
	text := func(dst *string) fieldFunc { return func(v *yaml.Node, p string) { d.str(v, p, dst) } }
	d.mapping(n, path, map[string]fieldFunc{
		"description":      text(&c.Description),
		"quickstart":       text(&c.Quickstart),
		"architecture":     text(&c.Architecture),
		"status":           text(&c.Status),
		"intended_use":     text(&c.IntendedUse),
		"out_of_scope_use": text(&c.OutOfScopeUse),
		"usage":            text(&c.Usage),
		"performance":      text(&c.Performance),
		"limitations":      text(&c.Limitations),
		"risks":            text(&c.Risks),
		"licensing":        text(&c.Licensing),
		"related":          text(&c.Related),
		"pipeline_tag":     text(&c.PipelineTag),
		"base_model":       func(v *yaml.Node, p string) { d.baseModel(v, p, c) },
		"license":          func(v *yaml.Node, p string) { d.license(v, p, c) },
	})
	m.Card = c
}

// baseModel takes a list of repos or, for convenience, a single string.
func (d *decoder) baseModel(n *yaml.Node, path string, c *Card) {
	if n = resolveAlias(n); n != nil && n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		c.BaseModel = []string{n.Value}
		return
	}
	d.strList(n, path, &c.BaseModel)
}

// license decodes the card's license mapping (id, name, link).
func (d *decoder) license(n *yaml.Node, path string, c *Card) {
	if isNull(n) {
		return
	}
	l := &License{}
	d.mapping(n, path, map[string]fieldFunc{
		"id":   func(v *yaml.Node, p string) { d.str(v, p, &l.ID) },
		"name": func(v *yaml.Node, p string) { d.str(v, p, &l.Name) },
		"link": func(v *yaml.Node, p string) { d.str(v, p, &l.Link) },
	})
	c.License = l
}
