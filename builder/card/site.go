package card

import (
	"bytes"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"

	"github.com/ttmodel/tt-model/internal/atomicfile"
	"github.com/ttmodel/tt-model/internal/webui"
	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/templates"
)

// The catalog as a small static site (`tt-model card --html DIR… --out
// SITE/`): index.html with a row per package, a page per package holding its
// model card as HTML, and style.css; plain files to host anywhere, no
// script, nothing fetched from elsewhere.

// siteEntry is one package of the site.
type siteEntry struct {
	Page        string // file name of its page
	Card        cardModel
	Kind        string
	Weights     string // repo @ revision, "repo (unpinned)" or "none"
	Revision    string // the full revision, when pinned
	Image       string // tag
	Digest      string
	Performance template.HTML
	Limitations template.HTML
	Body        template.HTML // the card's sections
}

// markdown renders the card's Markdown: GitHub's tables, headings with ids
// (the catalog's anchors); raw HTML in a card is escaped, not passed on.
func markdown(src string) (template.HTML, error) {
	md := goldmark.New(goldmark.WithExtensions(extension.GFM), goldmark.WithParserOptions(parser.WithAutoHeadingID()))
	var b bytes.Buffer
	if err := md.Convert([]byte(src), &b); err != nil {
		return "", err
	}
	return template.HTML(b.String()), nil //nolint:gosec // goldmark escapes raw HTML (no html.WithUnsafe)
}

var unsafePageChars = regexp.MustCompile(`[^a-z0-9._-]+`)

// RenderSite renders the site of the staged packages ws: file name ->
// content, and the warnings about what their cards lack. Nothing is
// written: a package that fails leaves any previous site as it was.
func RenderSite(ws []*manifest.Wire) (map[string][]byte, []string, error) {
	t, err := template.New("site").Funcs(webui.Funcs()).Funcs(template.FuncMap{"short": shortDigest}).ParseFS(templates.FS, "site_*.tmpl")
	if err != nil {
		return nil, nil, fmt.Errorf("parse site templates: %w", err)
	}
	files := map[string][]byte{"style.css": []byte(webui.Style)}
	var entries []siteEntry
	var warnings []string
	pages := map[string]string{} // page -> package
	for _, w := range ws {
		e, err := siteEntryFor(w)
		if err != nil {
			return nil, nil, err
		}
		if other, dup := pages[e.Page]; dup {
			return nil, nil, fmt.Errorf("packages %s and %s would both be %s: give them different names", other, w.Name, e.Page)
		}
		pages[e.Page] = w.Name
		for _, wn := range e.Card.Warnings {
			warnings = append(warnings, w.Name+": "+wn)
		}
		var b bytes.Buffer
		if err := t.ExecuteTemplate(&b, "site_page.tmpl", e); err != nil {
			return nil, nil, fmt.Errorf("render the page of %s: %w", w.Name, err)
		}
		files[e.Page] = b.Bytes()
		entries = append(entries, e)
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "site_index.tmpl", entries); err != nil {
		return nil, nil, fmt.Errorf("render the catalog index: %w", err)
	}
	files["index.html"] = b.Bytes()
	return files, warnings, nil
}

func siteEntryFor(w *manifest.Wire) (siteEntry, error) {
	cm, _, err := cardFor(w)
	if err != nil {
		return siteEntry{}, err
	}
	sections, err := renderCardTemplate("card_sections", cm)
	if err != nil {
		return siteEntry{}, fmt.Errorf("render card of %s: %w", w.Name, err)
	}
	e := siteEntry{Page: unsafePageChars.ReplaceAllString(strings.ToLower(w.Name), "-") + ".html", Card: cm,
		Kind: w.Container.Kind, Image: w.Container.Image.Tag, Digest: w.Container.Image.Digest, Weights: "none"}
	if model, _ := w.Container.Runtime["model"].(string); model != "" {
		e.Kind += " (" + model + ")"
	}
	if w.Weights != nil {
		e.Weights = w.Weights.Repo + " (unpinned)"
		if w.Weights.Revision != nil {
			e.Revision = *w.Weights.Revision
			e.Weights = w.Weights.Repo + " @ " + shortHex(e.Revision)
		}
	}
	for _, part := range []struct {
		dst *template.HTML
		src string
	}{{&e.Body, sections}, {&e.Performance, cm.Performance}, {&e.Limitations, cm.Limitations}} {
		if *part.dst, err = markdown(part.src); err != nil {
			return siteEntry{}, fmt.Errorf("card of %s: %w", w.Name, err)
		}
	}
	return e, nil
}

// shortDigest is "sha256:" and the digest's first 12 hex digits.
func shortDigest(d string) string {
	algo, hex, ok := strings.Cut(d, ":")
	if !ok {
		return shortHex(d)
	}
	return algo + ":" + shortHex(hex)
}

// WriteSite writes the files RenderSite made into dir (created if need
// be), each through a temporary file and a rename, so a reader never sees
// half a page. Other files in dir are left alone.
func WriteSite(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("site folder: %w", err)
	}
	for name, b := range files {
		path := filepath.Join(dir, name)
		if err := atomicfile.Write(path, b); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}

// shortHex is a digest's first 12 hex digits, as the image tags name it.
func shortHex(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
