package manifest

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/ttmodel/tt-model/internal/fslink"
	"github.com/ttmodel/tt-model/internal/safename"
	"github.com/ttmodel/tt-model/internal/suggest"
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)

// arches are the architectures a build can target.
var arches = []string{"blackhole", "wormhole_b0"}

// Validate checks the semantic rules (docs/manifest.md) that decoding cannot see,
// collecting every violation with its position.
func Validate(m *Manifest) ErrorList {
	c := &collector{file: m.File, pos: m.pos}
	if c.pos == nil {
		c.pos = positions{}
	}
	validateTop(c, m)
	validateWeights(c, m)
	validateSource(c, m)
	validateProfiles(c, m)
	validateCard(c, m)
	if k, ok := kinds[m.Kind]; ok {
		k.validate(c, m, k)
	}
	return c.errs.sorted()
}

// present reports whether the document wrote the field at path.
func (c *collector) present(path string) bool {
	_, ok := c.pos[path]
	return ok
}

func validateTop(c *collector, m *Manifest) {
	for _, req := range []string{"repo", "name", "weights", "arch", "source"} {
		if !c.present(req) {
			c.addf("", "%s is required", req)
		}
	}
	if m.Schema != SchemaVersion {
		c.addf("schema", "unsupported manifest schema %q; this tt-model authors schema %q", m.Schema, SchemaVersion)
	}
	if c.present("arch") && !slices.Contains(arches, m.Arch) {
		c.addf("arch", "must be one of %s, got %q", strings.Join(arches, ", "), m.Arch)
	}
	if _, ok := kinds[m.Kind]; !ok {
		c.addf("kind", "must be one of %s, got %q", strings.Join(KindNames(), ", "), m.Kind)
	}
	if c.present("repo") && !strings.Contains(m.Repo, "/") {
		c.addf("repo", "must be a namespaced Hub id (org/name), got %q", m.Repo)
	}
	if c.present("name") && !nameRE.MatchString(m.Name) {
		c.addf("name", "%q is not a safe slug: use lowercase letters, digits and '.', '_', '-', starting alphanumeric (it becomes a cache path and a container name)", m.Name)
	}
}

func validateWeights(c *collector, m *Manifest) {
	if c.present("weights") && m.Weights.Repo != "" && !strings.Contains(m.Weights.Repo, "/") {
		c.addf("weights", "must be a namespaced Hub id (org/name), got %q", m.Weights.Repo)
	}
	checkRevision(c, "weights.revision", m.Weights.Revision)
	seen := map[string]string{}
	if m.Weights.Repo != "" {
		seen[m.Weights.Repo] = "weights"
	}
	for i, w := range m.AuxiliaryWeights {
		path := indexPath("auxiliary_weights", i)
		checkRevision(c, path+".revision", w.Revision)
		if w.Repo != "" && !strings.Contains(w.Repo, "/") {
			c.addf(path, "must be a namespaced Hub id (org/name), got %q", w.Repo)
		}
		if first, dup := seen[w.Repo]; dup && w.Repo != "" {
			c.addf(path, "duplicate weight repository %q (already in %s)", w.Repo, first)
		}
		seen[w.Repo] = path
	}
}

// checkRevision refuses a revision the Hub could not have (it becomes the
// file refs/<revision> in the Hugging Face cache).
func checkRevision(c *collector, path, rev string) {
	if rev == "" {
		return
	}
	if err := safename.Revision(rev); err != nil {
		c.addf(path, "%v: want a 40-hex commit, or a branch or tag name", err)
	}
}

// escapes reports a path that is absolute or climbs out with "..".
func escapes(p string) bool {
	if strings.HasPrefix(p, "/") {
		return true
	}
	return slices.Contains(strings.Split(filepath.ToSlash(p), "/"), "..")
}

func validateSource(c *collector, m *Manifest) {
	if !c.present("source") {
		return
	}
	if c.present("source.code") && len(m.Source.Code) == 0 {
		c.addf("source.code", "must list at least one path")
	}
	for i, p := range m.Source.Code {
		if escapes(p) {
			c.addf(indexPath("source.code", i), "%q must be relative to the tt-metal tree (no absolute path, no '..')", p)
		}
	}
	for i, e := range m.Source.ExtraCode {
		base := indexPath("source.extra_code", i)
		if c.present(base+".paths") && len(e.Paths) == 0 {
			c.addf(base+".paths", "must list at least one path")
		}
		for j, p := range e.Paths {
			if escapes(p) {
				c.addf(indexPath(base+".paths", j), "%q must be relative to its root (no absolute path, no '..')", p)
			}
		}
	}
}

func validateProfiles(c *collector, m *Manifest) {
	profiles := m.Profiles()
	seen := map[string]bool{}
	for i, p := range m.ServeProfiles {
		if seen[p.Name] {
			c.addf(indexPath("serve_profiles", i)+".name", "duplicate serve profile name %q", p.Name)
		}
		seen[p.Name] = true
	}
	names := make([]string, len(profiles))
	for i, p := range profiles {
		names[i] = p.Name
	}
	if len(profiles) > 1 && m.DefaultProfile == "" {
		c.addf("serve_profiles", "a manifest with several serve profiles must name a default_profile (profiles: %s)", strings.Join(names, ", "))
	}
	if m.DefaultProfile != "" && !slices.Contains(names, m.DefaultProfile) {
		c.addf("default_profile", "%q names no profile; available: %s", m.DefaultProfile, strings.Join(names, ", "))
	}
	validateEnvNames(c, "serve", m.Serve)
	for i, p := range m.ServeProfiles {
		validateEnvNames(c, indexPath("serve_profiles", i), p.ServeSettings)
	}
	required := RequiredServeFields(m.Kind)
	for i, p := range profiles {
		where := "serve"
		if len(m.ServeProfiles) > 0 {
			where = indexPath("serve_profiles", i)
		}
		merged := mergeServe(m.Serve, p.ServeSettings)
		validateResolved(c, where, p.Name, merged, required)
	}
}

// validateEnvNames refuses env keys that `docker run --env` and an `export`
// line cannot carry.
func validateEnvNames(c *collector, path string, s ServeSettings) {
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		if !envNameRE.MatchString(k) {
			c.addf(path+".env."+k, "%q is not a valid environment variable name (letters, digits and '_', not starting with a digit)", k)
		}
	}
}

// mistyped reports whether the mapping at where, or serve:, holds a key
// near field that is not field: the decoder reported it as an unknown field
// naming field, and a "field is required" on top would say it twice.
func (c *collector) mistyped(where, field string) bool {
	for p := range c.pos {
		for _, parent := range []string{where + ".", "serve."} {
			if k, ok := strings.CutPrefix(p, parent); ok && !strings.ContainsAny(k, ".[") && k != field &&
				suggest.Distance(k, field) <= suggest.MaxDistance {
				return true
			}
		}
	}
	return false
}

// fieldPath points at where a merged field came from: the profile when it
// sets it, else serve:.
func fieldPath(c *collector, where, field string) string {
	if c.present(where + "." + field) {
		return where + "." + field
	}
	if c.present("serve." + field) {
		return "serve." + field
	}
	return where
}

func validateResolved(c *collector, where, name string, s ServeSettings, required []string) {
	for _, f := range required {
		if !serveFieldSet(s, f) && !c.mistyped(where, f) {
			c.addf(where, "serve profile %q: %s is required after merging serve: (set it on the profile or under serve:)", name, f)
		}
	}
	if s.Port != nil && (*s.Port < 1 || *s.Port > 65535) {
		c.addf(fieldPath(c, where, "port"), "%d is not a TCP port (1-65535)", *s.Port)
	}
	// Each field is checked on its own, so that one missing or mistyped
	// does not hide what is wrong with the other.
	var meshErr error
	var rows, cols int
	if s.MeshDevice != "" {
		if rows, cols, meshErr = MeshShape(s.MeshDevice); meshErr != nil {
			c.addf(fieldPath(c, where, "mesh_device"), "%v", meshErr)
		}
	}
	if s.Hardware == "" {
		return
	}
	chips, ok := ChipCount(s.Hardware)
	if !ok || chips < 1 {
		hint := ""
		if _, isPreset := meshPresets[s.Hardware]; isPreset {
			hint = fmt.Sprintf(" (%q is a mesh_device preset, not a board label)", s.Hardware)
		}
		c.addf(fieldPath(c, where, "hardware"), "%q is not a recognised board label%s: want <board>[xN] with board one of %s (a T3000 is n300x4, a QB2 is p300x2)",
			s.Hardware, hint, strings.Join(BoardNames(), ", "))
		return
	}
	if s.MeshDevice != "" && meshErr == nil && rows*cols != chips {
		c.addf(fieldPath(c, where, "mesh_device"), "%q opens a %dx%d mesh (%d chips) but hardware %q implies %d", s.MeshDevice, rows, cols, rows*cols, s.Hardware, chips)
	}
}

func serveFieldSet(s ServeSettings, field string) bool {
	switch field {
	case "hardware":
		return s.Hardware != ""
	case "mesh_device":
		return s.MeshDevice != ""
	case "max_num_seqs":
		return s.MaxNumSeqs != nil
	case "block_size":
		return s.BlockSize != nil
	case "max_model_len":
		return s.MaxModelLen != nil
	case "port":
		return s.Port != nil
	}
	return false
}

func validateCard(c *collector, m *Manifest) {
	if m.Card == nil || m.Card.License == nil {
		return
	}
	l := m.Card.License
	if l.ID == "" {
		c.addf("card.license.id", "is required (a Hub licence id such as apache-2.0, or other)")
	}
	if l.ID == "other" && (l.Name == "" || l.Link == "") {
		c.addf("card.license", `id "other" needs a name and a link to the terms`)
	}
}

// CheckSources requires every source.code path (under a local tt_metal tree)
// and every path under a local extra_code root to exist, and every symlink
// among them or below them to resolve inside the root it is listed under:
// a link that leaves the root, dangles or loops is reported at the path
// entry that ships it, naming the link and its target. Relative roots
// resolve against workDir (the process's working directory, as upstream),
// not against the YAML's folder.
func CheckSources(m *Manifest, workDir string) ErrorList {
	c := &collector{file: m.File, pos: m.pos}
	check := func(field, root string, paths []string) {
		root = expandHome(root)
		if !filepath.IsAbs(root) {
			root = filepath.Join(workDir, root)
		}
		r, err := fslink.NewRoot(root)
		for i, p := range paths {
			at := indexPath(field, i)
			if escapes(p) {
				continue // Validate reports it
			}
			if err != nil {
				c.addf(at, "%q does not exist under %s", p, root)
				continue
			}
			werr := r.Walk(p, func(e fslink.Entry) error {
				if e.Err != nil {
					c.addf(at, "%v", e.Err)
				}
				return nil
			})
			switch {
			case fslink.Missing(werr):
				c.addf(at, "%q does not exist under %s", p, root)
			case werr != nil:
				c.addf(at, "%v", werr)
			}
		}
	}
	if !m.Source.TTMetal.IsGit() && m.Source.TTMetal.Path != "" {
		check("source.code", m.Source.TTMetal.Path, m.Source.Code)
	}
	for i, e := range m.Source.ExtraCode {
		if !e.Root.IsGit() {
			check(indexPath("source.extra_code", i)+".paths", e.Root.Path, e.Paths)
		}
	}
	return c.errs.sorted()
}

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}
