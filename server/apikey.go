package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/ttmodel/tt-model/server/api"
)

// LoadAPIKey reads the server's API key: from file (--api-key-file), else
// from the file TT_API_KEY_FILE names, else TT_API_KEY itself; "" when none
// is set. source says where it came from, never the key. Surrounding
// whitespace (a file's trailing newline) is not part of the key.
func LoadAPIKey(file string, getenv func(string) string) (key, source string, err error) {
	what := "--api-key-file"
	if file == "" {
		file, what = getenv(api.APIKeyFileEnv), api.APIKeyFileEnv
	}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", "", fmt.Errorf("%s: %w", what, err)
		}
		if key = strings.TrimSpace(string(data)); key == "" {
			return "", "", fmt.Errorf("%s %s: the file is empty", what, file)
		}
		return key, what + " " + file, nil
	}
	if key = strings.TrimSpace(getenv(api.APIKeyEnv)); key != "" {
		return key, api.APIKeyEnv, nil
	}
	if getenv(api.APIKeyEnv) != "" {
		return "", "", errors.New(api.APIKeyEnv + " is blank")
	}
	return "", "", nil
}

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
			writeDetail(w, http.StatusUnauthorized, "Unauthorized: this server requires its API key (Authorization: Bearer KEY)")
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
