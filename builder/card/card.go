// Package card renders a built package's model card (README.md) from its
// wire manifest: the card the builder writes beside the manifest, the one a
// Hub push uploads (its quickstart naming the repo), the catalog of several
// packages and the static catalog site. It reads only the wire manifest, so
// `tt-model card` on a staged package gives the card the package carries.
package card

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"text/template"

	"go.yaml.in/yaml/v3"

	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/server/api"
	"github.com/ttmodel/tt-model/templates"
)

// notProvided stands in for a required card section the author left out:
// silence would read as "no limitations".
const notProvided = "_Not provided by the package author._"

// endpoint is one route of the served API, for the card.
type endpoint struct{ Method, Path, What string }

// goServerEndpoints are the routes tt-model-server answers for model: its
// route table (package server/api), the one the server itself dispatches
// from; nil for a model it does not serve.
func goServerEndpoints(model string) []endpoint {
	table, err := api.Table(model)
	if err != nil {
		return nil
	}
	var eps []endpoint
	for _, r := range table {
		eps = append(eps, endpoint{r.Method, r.Path, r.What})
	}
	return eps
}

// goServerPipelineTags are the Hub tasks of the models tt-model-server runs.
var goServerPipelineTags = map[string]string{api.KindRFDETR: "object-detection", api.KindPI05: "robotics"}

// cardProfile is one row of the profile table.
type cardProfile struct {
	Name, Hardware, Mesh, Description string
	Port                              int
	Default                           bool
}

// cardModel is everything the templates print for one package. It is
// derived from the wire manifest alone, so `tt-model card DIR` and `package`
// render the same text.
type cardModel struct {
	H1, H2         string // heading markers: "#"/"##" alone, "##"/"###" in a catalog
	Name           string
	Repo           string
	Description    string
	HardwareLine   string
	Packaged       string
	Glance         [][2]string
	IntendedUse    string
	OutOfScopeUse  string
	Quickstart     []string
	QuickstartNote string
	UsingIt        string // how a client talks to a server without an endpoint table
	API            string // the catalog's endpoints cell for such a server
	AuthorQuick    string
	ShowProfiles   bool
	Profiles       []cardProfile
	Endpoints      []endpoint
	Usage          string
	Performance    string
	Limitations    string
	Risks          string
	Licensing      string
	Related        string
	Provenance     [][2]string
	Hardware       []string // for the catalog row
	Status         string
	Warnings       []string
}

// frontMatter is the Hub's model-card metadata, in a fixed key order.
type frontMatter struct {
	License     string   `yaml:"license,omitempty"`
	LicenseName string   `yaml:"license_name,omitempty"`
	LicenseLink string   `yaml:"license_link,omitempty"`
	PipelineTag string   `yaml:"pipeline_tag,omitempty"`
	BaseModel   []string `yaml:"base_model,omitempty"`
	Tags        []string `yaml:"tags"`
}

// cardFor derives the card of a staged package from its wire manifest.
func cardFor(w *manifest.Wire) (cardModel, frontMatter, error) {
	c := w.Container
	if c == nil {
		return cardModel{}, frontMatter{}, fmt.Errorf("%s: not a container (5.1) manifest", w.Name)
	}
	card := c.Card
	if card == nil {
		card = &manifest.Card{}
	}
	cm := cardModel{H1: "#", H2: "##", Name: w.Name, Repo: stringField(c.Built, "repo")}
	cm.Description = strings.TrimSpace(card.Description)

	names := c.Profiles()
	def := c.DefaultProfileName()
	hwSet := map[string]bool{}
	for _, p := range names {
		rp, err := c.ResolveProfile(p.Name)
		if err != nil {
			return cardModel{}, frontMatter{}, fmt.Errorf("%s: %w", w.Name, err)
		}
		port := 8000
		if rp.Port != nil {
			port = *rp.Port
		}
		cm.Profiles = append(cm.Profiles, cardProfile{Name: rp.Name, Hardware: rp.Hardware, Mesh: rp.MeshDevice,
			Description: oneLine(rp.Description), Port: port, Default: rp.Name == def})
		if rp.Hardware != "" {
			hwSet[rp.Hardware] = true
		}
	}
	for hw := range hwSet {
		cm.Hardware = append(cm.Hardware, hw)
	}
	sort.Strings(cm.Hardware)
	cm.ShowProfiles = len(cm.Profiles) > 1
	if len(cm.Profiles) == 1 {
		p := cm.Profiles[0]
		cm.HardwareLine = fmt.Sprintf("Runs on **%s** (mesh `%s`), served on port %d.", p.Hardware, p.Mesh, p.Port)
	} else {
		var hs []string
		for _, h := range cm.Hardware {
			hs = append(hs, "**"+h+"**")
		}
		cm.HardwareLine = fmt.Sprintf("Runs on %s — see the serve profiles below.", strings.Join(hs, " or "))
	}

	image := c.Image.Tag
	cm.Packaged = fmt.Sprintf("Packaged with tt-model %s (manifest schema %s) as the image `%s`.",
		stringField(c.Built, "tt_model_version"), w.SchemaVersion, image)

	license := ""
	if card.License != nil {
		license = card.License.ID
		if card.License.Name != "" {
			license = card.License.Name
		}
	}
	defPort := 8000
	for _, p := range cm.Profiles {
		if p.Default {
			defPort = p.Port
		}
	}
	weightsRepo := ""
	if w.Weights != nil {
		weightsRepo = w.Weights.Repo
	}
	// The quickstart's commands reach the server where `serve --port` puts
	// it (serve's own default is the first free port from there, which it
	// prints): never the profile's port, which is the server's inside the
	// container, where `docker run -p` maps it from.
	hostPort := manifest.FirstHostPort
	kc := cardOfKind(c, weightsRepo, hostPort)
	cm.Status = oneLine(card.Status)
	for _, row := range [][2]string{
		{"Architecture", oneLine(card.Architecture)},
		{"Hardware", strings.Join(cm.Hardware, ", ")},
		{"Server", kc.Server},
		{"License", license},
		{"Status", cm.Status},
	} {
		if row[1] != "" {
			cm.Glance = append(cm.Glance, row)
		}
	}
	cm.IntendedUse = strings.TrimSpace(card.IntendedUse)
	cm.OutOfScopeUse = strings.TrimSpace(card.OutOfScopeUse)

	cm.Quickstart = append([]string{
		fmt.Sprintf("tt-model serve build/%s/tt_kernel_manifest.json --port %d   # pinned weights into the HF cache, then the default profile", w.Name, hostPort),
	}, kc.Try...)
	if image != "" {
		cm.Quickstart = append(cm.Quickstart,
			fmt.Sprintf("docker run --rm -p %d:%d -v \"$HOME/.cache/huggingface:/hf\" %s   # or the image alone: its server listens on %d", hostPort, defPort, image, defPort))
	}
	cm.QuickstartNote = fmt.Sprintf("Without `--port`, `serve` publishes the first free port from %d and prints its URL (`tt-model ps` lists it too). ", hostPort) +
		"Weights are not in the image: `serve` downloads the pinned revision into your Hugging Face cache, mounted at `/hf`. " + kc.Ready
	cm.AuthorQuick = strings.TrimRight(card.Quickstart, "\n ")
	cm.Endpoints = kc.Endpoints
	cm.UsingIt, cm.API = kc.UsingIt, kc.API
	cm.Usage = strings.TrimRight(card.Usage, "\n ")

	cm.Performance = strings.TrimSpace(card.Performance)
	if cm.Performance == "" {
		cm.Performance = notProvided
		cm.Warnings = append(cm.Warnings, "card.performance is missing: the card says it was not provided, and the package cannot be published to the catalog")
	}
	cm.Limitations = strings.TrimSpace(card.Limitations)
	if cm.Limitations == "" {
		cm.Limitations = notProvided
		cm.Warnings = append(cm.Warnings, "card.limitations is missing: the card says it was not provided, and the package cannot be published to the catalog")
	}
	cm.Risks = strings.TrimSpace(card.Risks)
	cm.Licensing = strings.TrimSpace(card.Licensing)
	cm.Related = strings.TrimSpace(card.Related)
	cm.Provenance = provenanceRows(w)

	fm := frontMatter{PipelineTag: card.PipelineTag, BaseModel: card.BaseModel}
	if card.License != nil {
		fm.License = oneLine(card.License.ID)
		if fm.License == "other" {
			fm.LicenseName = licenseSlug(card.License.Name)
			fm.LicenseLink = oneLine(card.License.Link)
		}
	}
	if fm.PipelineTag == "" {
		fm.PipelineTag = kc.PipelineTag
	}
	if len(fm.BaseModel) == 0 && w.Weights != nil {
		fm.BaseModel = []string{w.Weights.Repo}
	}
	fm.Tags = cardTags(w.Arch, c.Kind, cm.Hardware)
	return cm, fm, nil
}

func cardTags(arch, kind string, hardware []string) []string {
	set := map[string]bool{"tt-model": true, "tt-model-container": true, arch: true, kind: true}
	for _, h := range hardware {
		set[strings.ToLower(h)] = true
	}
	var tags []string
	for t := range set {
		if t != "" {
			tags = append(tags, t)
		}
	}
	sort.Strings(tags)
	return tags
}

// provenanceRows name every input of the image by what pins it.
func provenanceRows(w *manifest.Wire) [][2]string {
	c := w.Container
	var rows [][2]string
	if tm, ok := c.Built["tt_metal"].(map[string]any); ok {
		cell := "not recorded"
		sha := stringField(tm, "sha")
		remote := stringField(tm, "remote")
		switch {
		case sha != "" && strings.HasPrefix(remote, "https://"):
			cell = fmt.Sprintf("[`%s`](%s/commit/%s)", sha, strings.TrimSuffix(remote, ".git"), sha)
		case sha != "":
			cell = fmt.Sprintf("`%s` (a local checkout)", sha)
		case stringField(tm, "mode") == "local":
			cell = "a local tree that is not a git checkout"
		}
		if d, _ := tm["dirty"].(bool); d {
			cell += " *(dirty tree)*"
		}
		rows = append(rows, [2]string{"tt-metal tree (recorded)", cell})
	}
	if w.Weights != nil {
		cell := fmt.Sprintf("[`%s`](https://huggingface.co/%s)", w.Weights.Repo, w.Weights.Repo)
		if w.Weights.Revision != nil {
			cell += fmt.Sprintf(" at `%s`", *w.Weights.Revision)
		} else {
			cell += " (unpinned: the revision is resolved at serve time)"
		}
		rows = append(rows, [2]string{"weights", cell})
	}
	if srv, ok := c.Built["server"].(map[string]any); ok {
		rows = append(rows, [2]string{"tt-model-server", fmt.Sprintf("%s, sha256 `%s`", stringField(srv, "from"), shortHex(stringField(srv, "sha256")))})
	}
	if d := c.Image.Digest; d != "" {
		rows = append(rows, [2]string{"image", fmt.Sprintf("`%s`", d)})
	}
	if s := stringField(c.Built, "code_sha256"); s != "" {
		rows = append(rows, [2]string{"`code/` digest", fmt.Sprintf("`%s` (sha256, first 16 hex digits)", s[:min(16, len(s))])})
	}
	rows = append(rows, kindProvenanceRows(c.Built)...)
	rows = append(rows, [2]string{"built", fmt.Sprintf("%s by tt-model %s", stringField(c.Built, "created_at"), stringField(c.Built, "tt_model_version"))})
	return rows
}

func stringField(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// oneLine collapses whitespace: table cells and front matter must be one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cell is oneLine with pipes escaped, for Markdown table cells.
func cell(s string) string { return strings.ReplaceAll(oneLine(s), "|", `\|`) }

// licenseSlug is the shape the Hub's license_name accepts: lowercase, digits,
// dots and dashes.
func licenseSlug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '.' || r == '-' {
			b.WriteRune(r)
			dash = r == '-'
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-.")
}

func renderFrontMatter(fm frontMatter) (string, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(fm); err != nil {
		return "", fmt.Errorf("card front matter: %w", err)
	}
	if err := enc.Close(); err != nil {
		return "", fmt.Errorf("card front matter: %w", err)
	}
	return "---\n" + buf.String() + "---\n", nil
}

func cardTemplates() (*template.Template, error) {
	t, err := template.New("card").Funcs(template.FuncMap{"cell": cell}).ParseFS(templates.FS, "card*.tmpl")
	if err != nil {
		return nil, fmt.Errorf("parse card templates: %w", err)
	}
	return t, nil
}

// Render renders the model card (README.md) of a staged package and the
// warnings about what it lacks.
func Render(w *manifest.Wire) (string, []string, error) {
	cm, fm, err := cardFor(w)
	if err != nil {
		return "", nil, err
	}
	return render(w, cm, fm)
}

// render renders one package's card from its model and front matter.
func render(w *manifest.Wire, cm cardModel, fm frontMatter) (string, []string, error) {
	front, err := renderFrontMatter(fm)
	if err != nil {
		return "", nil, err
	}
	out, err := renderCardTemplate("card.tmpl", struct {
		FrontMatter string
		Model       cardModel
	}{front, cm})
	if err != nil {
		return "", nil, fmt.Errorf("render card of %s: %w", w.Name, err)
	}
	return out, cm.Warnings, nil
}

// RenderCatalog renders one page for several packages: a row per model, then
// each model's sections one heading level down.
func RenderCatalog(ws []*manifest.Wire) (string, []string, error) {
	var models []cardModel
	var warnings []string
	tags := map[string]bool{}
	for _, w := range ws {
		cm, fm, err := cardFor(w)
		if err != nil {
			return "", nil, err
		}
		cm.H1, cm.H2 = "##", "###"
		models = append(models, cm)
		for _, wn := range cm.Warnings {
			warnings = append(warnings, w.Name+": "+wn)
		}
		for _, t := range fm.Tags {
			tags[t] = true
		}
	}
	var tagList []string
	for t := range tags {
		tagList = append(tagList, t)
	}
	sort.Strings(tagList)
	front, err := renderFrontMatter(frontMatter{Tags: tagList})
	if err != nil {
		return "", nil, err
	}
	out, err := renderCardTemplate("card_catalog.tmpl", struct {
		FrontMatter string
		Models      []cardModel
	}{front, models})
	if err != nil {
		return "", nil, fmt.Errorf("render catalog: %w", err)
	}
	return out, warnings, nil
}

// renderCardTemplate executes one of the card templates and tidies the
// Markdown it leaves.
func renderCardTemplate(name string, data any) (string, error) {
	t, err := cardTemplates()
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, data); err != nil {
		return "", err
	}
	return tidyMarkdown(buf.String()), nil
}

// tidyMarkdown squeezes the blank-line runs template conditionals leave.
func tidyMarkdown(s string) string {
	lines := strings.Split(s, "\n")
	var out []string
	blank := 0
	for _, l := range lines {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			blank++
			if blank > 1 {
				continue
			}
		} else {
			blank = 0
		}
		out = append(out, l)
	}
	return strings.TrimSpace(strings.Join(out, "\n")) + "\n"
}
