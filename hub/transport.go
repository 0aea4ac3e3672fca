package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client talks to one Hub endpoint and writes one cache.
type Client struct {
	cfg     Config
	origin  *url.URL // the endpoint, parsed: the only place the token goes
	cache   Cache
	http    *http.Client
	workers int
	backoff backoff
	// idle is how long a download may go without receiving a byte before
	// the connection is dropped and the transfer resumed.
	idle time.Duration
	// offlineWhy says why the network is not used, for errors.
	offlineWhy string
}

// backoff is huggingface_hub's http_backoff schedule: up to Retries retries,
// waiting Base, 2×Base, … capped at Max (or the Retry-After the Hub asks for).
type backoff struct {
	Retries   int
	Base, Max time.Duration
}

func (b backoff) wait(attempt int, resp *http.Response) time.Duration {
	if resp != nil {
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			return min(time.Duration(s)*time.Second, 4*b.Max)
		}
	}
	d := b.Base << attempt
	if d > b.Max || d <= 0 {
		d = b.Max
	}
	return d
}

// Option adjusts a Client.
type Option func(*Client)

// WithBackoff sets the retry schedule for transient failures (default: 5
// retries from 1 s, capped at 8 s, as huggingface_hub's http_backoff).
func WithBackoff(retries int, base, max time.Duration) Option {
	return func(c *Client) { c.backoff = backoff{Retries: retries, Base: base, Max: max} }
}

// WithIdleTimeout sets how long a transfer may receive nothing before it is
// abandoned and resumed (default 60 s, huggingface_hub's download timeout).
func WithIdleTimeout(d time.Duration) Option { return func(c *Client) { c.idle = d } }

// NewClient builds a client for cfg. It transfers 8 files at once, as
// huggingface_hub's snapshot_download does.
func NewClient(cfg Config, opts ...Option) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 60 * time.Second
	// A Config built by hand may still carry user:password@ in Endpoint.
	if endpoint, user, err := splitEndpoint(cfg.Endpoint); err == nil {
		cfg.Endpoint = endpoint
		if user != nil {
			cfg.EndpointUser = user
		}
	}
	origin, err := url.Parse(cfg.Endpoint)
	if err != nil {
		origin = &url.URL{} // matches no request URL: no credential is ever sent
	}
	c := &Client{
		cfg:     cfg,
		origin:  origin,
		cache:   Cache{Dir: cfg.CacheDir},
		workers: 8,
		backoff: backoff{Retries: 5, Base: time.Second, Max: 8 * time.Second},
		idle:    60 * time.Second,
	}
	if cfg.Offline {
		c.offlineWhy = "HF_HUB_OFFLINE is set"
	}
	c.http = &http.Client{Transport: tr, CheckRedirect: c.checkRedirect}
	for _, o := range opts {
		o(c)
	}
	return c
}

// checkRedirect keeps Authorization on a redirect only when the new URL has
// the endpoint's scheme, host and port, the origin rule of httpx that
// huggingface_hub's client follows (httpx _same_origin; httpx also keeps it
// for an http to https upgrade on the default ports, which is not needed
// for an endpoint given with its scheme). Go's own rule
// compares host names only, so it would send the token to another port of
// the same host, or over plain http after an https endpoint.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if !sameOrigin(req.URL, c.origin) {
		req.Header.Del("Authorization")
	}
	return nil
}

// sameOrigin reports whether a and b have one scheme, host and port (the
// scheme's default port when none is written).
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) &&
		portOrDefault(a) == portOrDefault(b)
}

func portOrDefault(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

// Offline is a copy of the client that never uses the network, as with
// HF_HUB_OFFLINE: it answers from the cache or fails.
func (c *Client) Offline() *Client {
	off := *c
	off.cfg.Offline, off.offlineWhy = true, "offline"
	return &off
}

// Cache is the cache this client writes.
func (c *Client) Cache() Cache { return c.cache }

// Endpoint is the Hub this client talks to.
func (c *Client) Endpoint() string { return c.cfg.Endpoint }

// call is one HTTP exchange with the Hub (or the storage it redirects to).
type call struct {
	method, url string
	repo        string // for error messages
	header      http.Header
	// body opens the request body afresh for each attempt; nil sends none.
	body func() (io.Reader, error)
	size int64 // Content-Length of body; -1 when unknown
	// retryNetwork also retries refused connections and timeouts. Reads that
	// may fall back to the cache leave it off, as huggingface_hub does, so an
	// unreachable Hub is noticed at once; writes turn it on.
	retryNetwork bool
	noRedirect   bool
}

// retryableStatus are the answers huggingface_hub's http_backoff retries.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// do sends cl, retrying transient failures with backoff. It returns a
// response with a status below 400 (the caller closes its body) or an error:
// an *HTTPError for the last answer, or the transport error.
func (c *Client) do(ctx context.Context, cl call) (*http.Response, error) {
	return c.send(ctx, cl, c.backoff.Retries)
}

// doOnce is do without retries, for callers that resume on their own.
func (c *Client) doOnce(ctx context.Context, cl call) (*http.Response, error) {
	return c.send(ctx, cl, 0)
}

func (c *Client) send(ctx context.Context, cl call, retries int) (*http.Response, error) {
	hc := c.http
	if cl.noRedirect {
		nr := *c.http // a copy: c.http is shared by the workers
		nr.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		hc = &nr
	}
	for attempt := 0; ; attempt++ {
		req, err := c.newRequest(ctx, cl)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		var wait time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil || !cl.retryNetwork || attempt >= retries {
				return nil, fmt.Errorf("%s %s: %w", cl.method, cl.url, err)
			}
			wait = c.backoff.wait(attempt, nil)
			slog.Warn("Hub request failed, retrying", "method", cl.method, "url", cl.url, "err", err, "in", wait)
		case resp.StatusCode < 400:
			return resp, nil
		case retryableStatus(resp.StatusCode) && attempt < retries:
			wait = c.backoff.wait(attempt, resp)
			slog.Warn("Hub answered a transient error, retrying", "method", cl.method, "url", cl.url, "status", resp.StatusCode, "in", wait)
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
		default:
			defer resp.Body.Close()
			return nil, responseError(resp, cl.repo)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%s %s: %w", cl.method, cl.url, ctx.Err())
		case <-t.C:
		}
	}
}

// newRequest adds the user agent and, for the Hub endpoint only, the token
// (else the endpoint's user:password as Basic authentication).
// checkRedirect drops it on a redirect away from the endpoint, so it never
// reaches the storage a download is redirected to.
func (c *Client) newRequest(ctx context.Context, cl call) (*http.Request, error) {
	var body io.Reader
	if cl.body != nil {
		var err error
		if body, err = cl.body(); err != nil {
			return nil, fmt.Errorf("%s %s: %w", cl.method, cl.url, err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, cl.url, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", cl.method, cl.url, err)
	}
	if body != nil && cl.size >= 0 {
		req.ContentLength = cl.size
		if cl.size == 0 {
			req.Body = http.NoBody
		}
	}
	for k, v := range cl.header {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "tt-model-hub/1")
	if sameOrigin(req.URL, c.origin) {
		switch user := c.cfg.EndpointUser; {
		case c.cfg.Token != "":
			req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
		case user != nil:
			pass, _ := user.Password()
			req.SetBasicAuth(user.Username(), pass)
		}
	}
	return req, nil
}

// errTokenless explains an operation that needs a token when none is set.
var errTokenless = errors.New("no Hub token: set HF_TOKEN or run `tt-model login`")
