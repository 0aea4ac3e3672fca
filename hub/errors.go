package hub

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// The X-Error-Code values huggingface_hub's hf_raise_for_status recognises
// (utils/_http.py), and the message the Hub sends with a 401 for a token it
// does not accept.
const (
	CodeRepoNotFound     = "RepoNotFound"
	CodeRevisionNotFound = "RevisionNotFound"
	CodeEntryNotFound    = "EntryNotFound"
	CodeGatedRepo        = "GatedRepo"

	msgInvalidCredentials = "Invalid credentials in Authorization header"
)

// HTTPError is a Hub answer other than success. The Hub was reached, so it is
// never a reason to fall back to the cache.
type HTTPError struct {
	Method, URL string
	Status      int
	Code        string // X-Error-Code
	Message     string // X-Error-Message, else the JSON body's "error"
	RequestID   string // X-Request-Id
	Repo        string // the repo the request was about, when known
}

func (e *HTTPError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: HTTP %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.RequestID != "" {
		b.WriteString(" (request id " + e.RequestID + ")")
	}
	repo := e.Repo
	if repo == "" {
		repo = "the repo"
	}
	switch {
	case e.Code == CodeRevisionNotFound:
		b.WriteString(": no such revision in " + repo)
	case e.Code == CodeEntryNotFound:
		b.WriteString(": no such file in " + repo + " at that revision")
	case e.Code == CodeGatedRepo:
		fmt.Fprintf(&b, ": %s is gated: accept its conditions on the Hub, then use a token of that account (HF_TOKEN or `tt-model login`)", repo)
	case e.Status == http.StatusUnauthorized && e.Message == msgInvalidCredentials:
		b.WriteString(": the Hub refused the token (HF_TOKEN or the token file): log in again with `tt-model login`")
	case e.Status == http.StatusUnauthorized && e.Method != http.MethodGet && e.Method != http.MethodHead:
		fmt.Fprintf(&b, ": writing to %s needs a valid token with write access (HF_TOKEN or `tt-model login`)", repo)
	case e.Code == CodeRepoNotFound || e.Status == http.StatusUnauthorized:
		// The Hub answers 401 for a private or missing repo when no token is
		// sent, as huggingface_hub notes; it cannot tell the two apart.
		fmt.Fprintf(&b, ": %s does not exist, or it is private and this token cannot see it (set HF_TOKEN or run `tt-model login`)", repo)
	case e.Status == http.StatusForbidden:
		fmt.Fprintf(&b, ": the token lacks the permission this needs on %s (a write token for push)", repo)
	}
	return b.String()
}

// NotFound reports a repo, revision or file the Hub says does not exist.
func (e *HTTPError) NotFound() bool {
	return e.Status == http.StatusNotFound || e.Code == CodeRepoNotFound || e.Code == CodeRevisionNotFound || e.Code == CodeEntryNotFound
}

// ParseError is a Hub answer this client cannot use: not JSON, or a field
// missing or of the wrong shape. Like an HTTPError it means the Hub was
// reached, so the cache is not consulted instead.
type ParseError struct {
	Endpoint string // method and URL
	Field    string // JSON path, e.g. "[3].lfs.oid", or a header name
	Problem  string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("%s: unusable answer: %s: %s", e.Endpoint, e.Field, e.Problem)
}

// ErrOfflineMiss means the cache cannot answer and the network may not be
// used (HF_HUB_OFFLINE) or cannot be reached.
var ErrOfflineMiss = errors.New("not complete in the local cache")

// Unreachable reports an error that means the Hub could not be reached at all
// (DNS, refused or reset connection, timeout, TLS), the cases where
// huggingface_hub falls back to its cache (ConnectError, TimeoutException).
// An HTTP status or an unparsable answer is not one of them.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var httpErr *HTTPError
	var parseErr *ParseError
	if errors.As(err, &httpErr) || errors.As(err, &parseErr) || errors.Is(err, context.Canceled) {
		return false
	}
	var netErr net.Error
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var recordErr tls.RecordHeaderError
	switch {
	case errors.As(err, &dnsErr), errors.As(err, &certErr), errors.As(err, &unknownAuth),
		errors.As(err, &hostErr), errors.As(err, &recordErr), errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return true // refused, no route, network down
	}
	return errors.As(err, &netErr) && netErr.Timeout()
}

// responseError turns a non-success answer into an *HTTPError.
func responseError(resp *http.Response, repo string) error {
	e := &HTTPError{
		Method: resp.Request.Method, URL: resp.Request.URL.String(), Status: resp.StatusCode,
		Code: resp.Header.Get("X-Error-Code"), Message: resp.Header.Get("X-Error-Message"),
		RequestID: resp.Header.Get("X-Request-Id"), Repo: repo,
	}
	if e.Message == "" && resp.Request.Method != http.MethodHead {
		var body struct {
			Error any `json:"error"`
		}
		if json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&body) == nil {
			switch v := body.Error.(type) {
			case string:
				e.Message = v
			case []any: // {"error": ["a", "b"]}, as _format reads it
				var parts []string
				for _, p := range v {
					parts = append(parts, fmt.Sprint(p))
				}
				e.Message = strings.Join(parts, "; ")
			}
		}
	}
	return e
}
