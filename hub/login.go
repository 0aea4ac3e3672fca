package hub

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Tokens are stored as huggingface_hub's login stores them (_login.py
// _validate_and_save_token, utils/_auth.py): the active token alone in the
// token file (HF_TOKEN_PATH, else $HF_HOME/token), and every saved token as
// a section of the INI file stored_tokens beside it:
//
//	[name]
//	hf_token = hf_…
//
// Both are written owner-only (0600, folder 0700), as _write_secret does.

// TokenPaths are the token file and the stored_tokens file for cfg.
func TokenPaths(getenv func(string) string, cfg Config) (token, stored string) {
	token = getenv("HF_TOKEN_PATH")
	if token == "" {
		token = filepath.Join(cfg.HFHome, "token")
	}
	return token, filepath.Join(filepath.Dir(token), "stored_tokens")
}

// SaveToken stores token under name and makes it the active token. The
// other sections of stored_tokens are kept with all their fields (an OAuth
// token's refresh_token and expires_at).
func SaveToken(tokenPath, storedPath, name, token string) error {
	if name == "" || strings.ContainsAny(name, "[]\n\r") {
		return fmt.Errorf("token name %q cannot be an INI section", name)
	}
	sections, err := readStoredTokens(storedPath)
	if err != nil {
		return err
	}
	sections[name] = []string{"hf_token = " + token} // the whole section, as _save_token replaces it
	names := make([]string, 0, len(sections))
	for n := range sections {
		names = append(names, n)
	}
	sort.Strings(names) // _save_stored_tokens_full writes them sorted
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "[%s]\n%s\n\n", n, strings.Join(sections[n], "\n"))
	}
	if err := writeSecret(storedPath, b.String()); err != nil {
		return err
	}
	return writeSecret(tokenPath, token)
}

// readStoredTokens reads stored_tokens as its sections' key = value lines.
func readStoredTokens(path string) (map[string][]string, error) {
	out := map[string][]string{}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			out[section] = nil
		case section != "" && strings.Contains(line, "="):
			out[section] = append(out[section], line)
		}
	}
	return out, sc.Err()
}

func writeSecret(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return err
	}
	return os.Chmod(filepath.Dir(path), 0o700)
}
