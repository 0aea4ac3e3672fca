// Package browsertest drives Debian's chromium, headless, for the tests of
// the web pages our binaries serve (the server's console, the supervisor's
// status page, the catalog site), through the Chrome DevTools Protocol
// (chromedp). A test starts one browser and opens a tab per page; every
// request a tab makes is recorded, so a test can check that a page never
// leaves its server's origin, and screenshots land in a folder the test
// prints.
package browsertest

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/ttmodel/tt-model/internal/testing/testenv"
)

// ScreenshotsEnv names the folder screenshots are written to; unset, they go
// to tt-model-screenshots/<test> under the system's temporary folder
// (overwritten by the next run, kept after it for a look).
const ScreenshotsEnv = "TT_SCREENSHOTS"

// UpdateDocsEnv, set to 1, makes DocImage copy a test's screenshot over the
// README's picture of that page (docs/images).
const UpdateDocsEnv = "TT_UPDATE_SCREENSHOTS"

// Width and Height are the browser window: a laptop screen.
const Width, Height = 1280, 900

// Browser is one headless chromium, shared by a test and its subtests.
type Browser struct {
	ctx context.Context // the browser's first tab: it keeps the browser alive
}

// Start starts chromium for t (testenv requirement "chromium"); it is
// closed when t ends. Start one per test binary where the tests allow it:
// each costs a second or two of the machine's CPU.
func Start(t *testing.T) *Browser {
	t.Helper()
	testenv.Require(t, "chromium")
	exe, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(Width, Height),
		// Chromium refuses to run as root with its sandbox; these tests
		// open only pages our own binaries serve.
		chromedp.NoSandbox,
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("hide-scrollbars", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil { // starts the browser, with no deadline
		t.Fatalf("start chromium: %v", err)
	}
	return &Browser{ctx: ctx}
}

// Page is one tab.
type Page struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	requests []string // every URL the tab requested, in order
}

// Page opens a tab for t, closed when t ends; every action on it must finish
// within timeout.
func (b *Browser) Page(t *testing.T, timeout time.Duration) *Page {
	t.Helper()
	tab, cancelTab := chromedp.NewContext(b.ctx)
	t.Cleanup(cancelTab)
	ctx, cancel := context.WithTimeout(tab, timeout)
	t.Cleanup(cancel)
	p := &Page{t: t, ctx: ctx}
	sent := chromedp.Events(ctx, network.RequestWillBeSent)
	go func() {
		for ev, err := range sent {
			if err != nil {
				return
			}
			p.mu.Lock()
			p.requests = append(p.requests, ev.Request.URL)
			p.mu.Unlock()
		}
	}()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(Width, Height)); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return p
}

// Context is the tab's context, for chromedp calls this package does not wrap.
func (p *Page) Context() context.Context { return p.ctx }

// Do runs actions in order; the test fails at the first error.
func (p *Page) Do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// Run runs one action on p and returns its value; the test fails on error.
func Run[T any](p *Page, a chromedp.Action[T]) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, a)
	if err != nil {
		p.t.Fatalf("browser: %v", err)
	}
	return v
}

// Eval evaluates a JavaScript expression in the page and decodes its value
// (a promise's, with chromedp.EvalAwaitPromise).
func Eval[T any](p *Page, expr string, opts ...chromedp.EvaluateOption) T {
	p.t.Helper()
	return Run(p, chromedp.Evaluate[T](expr, opts...))
}

// WaitFor polls a JavaScript expression until it is truthy (within the
// page's timeout); what fails names the expression.
func (p *Page) WaitFor(expr string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond),
		chromedp.WithPollingTimeout(time.Until(deadline(p.ctx))))); err != nil {
		p.t.Fatalf("waiting for %s: %v", expr, err)
	}
}

func deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Minute)
}

// Requests are the URLs the tab has requested so far.
func (p *Page) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests...)
}

// CheckSameOrigin fails the test for every request of the tab that went
// anywhere but origin (scheme://host:port); data: and blob: URLs stay in the
// page and are allowed. It returns how many requests it checked.
func (p *Page) CheckSameOrigin(origin string) int {
	p.t.Helper()
	want, err := url.Parse(origin)
	if err != nil {
		p.t.Fatal(err)
	}
	reqs := p.Requests()
	for _, r := range reqs {
		u, err := url.Parse(r)
		switch {
		case err != nil:
			p.t.Errorf("the page requested an unparsable URL %q", r)
		case u.Scheme == "data" || u.Scheme == "blob":
		case u.Scheme != want.Scheme || u.Host != want.Host:
			p.t.Errorf("the page requested %s, outside its origin %s", r, origin)
		}
	}
	return len(reqs)
}

// Screenshot saves the whole page as NAME.png in the screenshot folder,
// logs its path and returns it.
func (p *Page) Screenshot(name string) string {
	p.t.Helper()
	png := Run(p, chromedp.FullScreenshot(100)) // 100: PNG, not JPEG
	dir := screenshotDir(p.t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot: %s", path)
	return path
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func screenshotDir(t *testing.T) string {
	if d := os.Getenv(ScreenshotsEnv); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "tt-model-screenshots", unsafeName.ReplaceAllString(t.Name(), "_"))
}

// DocImage copies the screenshot at shot over the README picture doc (a
// path from the test's package folder, e.g. ../docs/images/console.png)
// when TT_UPDATE_SCREENSHOTS=1, refusing one over maxBytes: the README's
// pictures stay small.
func DocImage(t *testing.T, shot, doc string, maxBytes int) {
	t.Helper()
	if os.Getenv(UpdateDocsEnv) != "1" {
		return
	}
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > maxBytes {
		t.Fatalf("%s is %d bytes, over the %d allowed for a README picture", shot, len(b), maxBytes)
	}
	if err := os.WriteFile(doc, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("README picture updated: %s", doc)
}
