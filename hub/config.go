// Package hub is a Hugging Face Hub client for pinned model weights: it
// resolves a revision to a commit, lists the files with their sizes and
// hashes, downloads them in parallel with resume, verifies every file, and
// writes the cache layout of huggingface_hub (blobs, refs, relative snapshot
// symlinks, locks), so the two are interchangeable.
package hub

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// DefaultEndpoint is the public Hub.
const DefaultEndpoint = "https://huggingface.co"

// Config says where the Hub and the cache are. Build it with ConfigFromEnv
// so the HF_* variables mean what they mean to huggingface_hub.
type Config struct {
	Endpoint string // HF_ENDPOINT, without a trailing slash and without its user:password@
	// EndpointUser is the user:password@ HF_ENDPOINT had: sent as Basic
	// authentication to the endpoint when there is no token, and never
	// part of a URL, so no error or log line can show it.
	EndpointUser *url.Userinfo
	Token        string // HF_TOKEN, else the token file under HF_HOME; sent as a Bearer token
	CacheDir     string // HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
	HFHome       string // HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface
	Offline      bool   // HF_HUB_OFFLINE (else TRANSFORMERS_OFFLINE): never touch the network
}

// ConfigFromEnv reads the configuration the way huggingface_hub does.
// getenv is os.Getenv in production and a map lookup in tests.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	home := getenv("HF_HOME")
	if home == "" {
		cache := getenv("XDG_CACHE_HOME")
		if cache == "" {
			userHome := getenv("HOME")
			if userHome == "" {
				var err error
				if userHome, err = os.UserHomeDir(); err != nil {
					return Config{}, fmt.Errorf("hub cache: HF_HOME unset and no home directory: %w", err)
				}
			}
			cache = filepath.Join(userHome, ".cache")
		}
		home = filepath.Join(cache, "huggingface")
	}
	endpoint, user, err := splitEndpoint(getenv("HF_ENDPOINT"))
	if err != nil {
		return Config{}, err
	}
	c := Config{
		Endpoint:     endpoint,
		EndpointUser: user,
		Token:        getenv("HF_TOKEN"),
		CacheDir:     getenv("HF_HUB_CACHE"),
		HFHome:       home,
		Offline:      envTrue(firstNonEmpty(getenv("HF_HUB_OFFLINE"), getenv("TRANSFORMERS_OFFLINE"))),
	}
	if c.CacheDir == "" {
		c.CacheDir = filepath.Join(home, "hub")
	}
	if c.Token == "" {
		tokenPath := getenv("HF_TOKEN_PATH")
		if tokenPath == "" {
			tokenPath = filepath.Join(home, "token")
		}
		if b, err := os.ReadFile(tokenPath); err == nil {
			c.Token = strings.TrimSpace(string(b))
		}
	}
	return c, nil
}

// splitEndpoint takes the user:password@ out of an HF_ENDPOINT ("" is the
// public Hub) and drops a trailing slash. Its errors never quote the value,
// which may hold a password.
func splitEndpoint(raw string) (string, *url.Userinfo, error) {
	raw = strings.TrimRight(raw, "/")
	if raw == "" {
		return DefaultEndpoint, nil, nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", nil, errors.New("HF_ENDPOINT: want an http:// or https:// URL of a Hub (the value is not shown: it may hold a password)")
	}
	user := u.User
	u.User = nil
	return u.String(), user, nil
}

// envTrue is huggingface_hub's _is_true: 1, ON, YES or TRUE in any case.
func envTrue(v string) bool {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}
