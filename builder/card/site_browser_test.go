package card

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ttmodel/tt-model/internal/testing/browsertest"
)

// The catalog site in a real browser: the index links every package's page,
// each page is that package's card, and nothing is requested from anywhere
// but the site.
func TestCatalogSiteInBrowser(t *testing.T) {
	b := browsertest.Start(t)
	ws := readWires(t, "demo", "pi05")
	files, _, err := RenderSite(ws)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteSite(dir, files); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer ts.Close()

	p := b.Page(t, time.Minute)
	p.Do(chromedp.Navigate(ts.URL+"/index.html"), chromedp.WaitVisible(chromedp.ID("packages")))
	type link struct{ Href, Text string }
	links := browsertest.Eval[[]link](p, `[...document.querySelectorAll('#packages tbody th a')].map((a) => ({Href: a.getAttribute('href'), Text: a.textContent}))`)
	var pages, names []string
	for name := range files {
		if strings.HasSuffix(name, ".html") && name != "index.html" {
			pages = append(pages, name)
		}
	}
	for _, w := range ws {
		names = append(names, w.Name)
	}
	var linked, texts []string
	for _, l := range links {
		linked, texts = append(linked, l.Href), append(texts, l.Text)
	}
	slices.Sort(pages)
	slices.Sort(linked)
	if !slices.Equal(pages, linked) || !slices.Equal(texts, names) {
		t.Fatalf("the index links %v (%v); the site's pages are %v, its packages %v", linked, texts, pages, names)
	}
	row := browsertest.Eval[string](p, `document.querySelector('#packages tbody tr:nth-child(2)').textContent`)
	for _, want := range []string{"go-server (pi05)", "p300x2", "lerobot/pi05_base (unpinned)", "sha256:0123456789ab"} {
		if !strings.Contains(row, want) {
			t.Errorf("the pi05 row lacks %q: %s", want, row)
		}
	}
	p.Screenshot("catalog-index")
	for i, l := range links {
		p.Do(chromedp.Click(chromedp.CSS(`#packages a[href="`+l.Href+`"]`)), chromedp.WaitVisible(chromedp.CSS("article.card h1")))
		if h1 := browsertest.Eval[string](p, `document.querySelector('article.card h1').textContent`); h1 != l.Text {
			t.Errorf("%s: the page's heading is %q, want %q", l.Href, h1, l.Text)
		}
		if n := browsertest.Eval[int](p, `document.querySelectorAll('article.card table').length`); n < 2 {
			t.Errorf("%s: %d tables: the card's tables were not rendered", l.Href, n)
		}
		if i == len(links)-1 {
			p.Screenshot("catalog-page")
		}
		p.Do(chromedp.Click(chromedp.CSS(`nav a[href="index.html"]`)), chromedp.WaitVisible(chromedp.ID("packages")))
	}
	p.CheckSameOrigin(ts.URL)
}
