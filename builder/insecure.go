package builder

import (
	"crypto/tls"
	"net/http"
)

// insecureTransport is the default transport without TLS verification, for
// --insecure registries that use a self-signed certificate; plain HTTP is
// allowed by name.Insecure on the reference.
func insecureTransport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the user asked for --insecure
	return t
}
