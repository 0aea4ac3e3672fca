package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// requireKey answers 401 to a request that does not carry key, as vLLM's
// and SGLang's --api-key do: "Authorization: Bearer KEY", or OpenPI's
// client's "Authorization: Api-Key KEY" (sent with its websocket upgrade).
// Both sides are hashed first, so the constant-time compare does not even
// leak the key's length.
func requireKey(key string, h http.HandlerFunc) http.HandlerFunc {
	want := sha256.Sum256([]byte(key))
	return func(w http.ResponseWriter, r *http.Request) {
		got := sha256.Sum256([]byte(presentedKey(r)))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="tt-model-server"`)
			WriteDetail(w, http.StatusUnauthorized, "Unauthorized: this server requires its API key (Authorization: Bearer KEY)")
			return
		}
		h(w, r)
	}
}

// presentedKey is the credential of r's Authorization header ("" when none).
func presentedKey(r *http.Request) string {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !(strings.EqualFold(scheme, "Bearer") || strings.EqualFold(scheme, "Api-Key")) {
		return ""
	}
	return strings.TrimSpace(cred)
}
