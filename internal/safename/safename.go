// Package safename holds the rules for names that come from outside (a Hub
// answer, a pulled package, a command line) and end up naming a file: a
// revision, and a path joined under a root. Both the manifest and the hub
// packages use them, so they live below both.
package safename

import (
	"fmt"
	"path/filepath"
	"strings"
)

// MaxRevision is the longest revision accepted, in bytes (git's own limit
// on a ref name component is the file system's, 255).
const MaxRevision = 255

// Revision checks a revision as the Hub and git accept one: a 40-hex commit,
// or a branch or tag name by git's check-ref-format rules (refs/pr/1 and
// refs/convert/parquet are valid Hub revisions). The rules that matter for
// the cache, where a ref becomes the file refs/<rev>: no "..", no leading
// or trailing "/", no empty or "."-led component, no control character.
func Revision(rev string) error {
	bad := func(why string) error { return fmt.Errorf("revision %q: %s", rev, why) }
	switch {
	case rev == "":
		return bad("empty")
	case len(rev) > MaxRevision:
		return bad(fmt.Sprintf("longer than %d bytes", MaxRevision))
	case rev == "@":
		return bad(`"@" alone is not a branch or tag`)
	case strings.HasPrefix(rev, "/"):
		return bad(`must not start with "/"`)
	case strings.HasSuffix(rev, "/"):
		return bad(`must not end with "/"`)
	case strings.Contains(rev, ".."):
		return bad(`".." is not allowed`)
	case strings.Contains(rev, "@{"):
		return bad(`"@{" is not allowed`)
	case strings.HasSuffix(rev, "."):
		return bad(`must not end with "."`)
	}
	for _, c := range rev {
		switch {
		case c < 0x20 || c == 0x7f:
			return bad(fmt.Sprintf("control character %U is not allowed", c))
		case strings.ContainsRune(" ~^:?*[\\", c):
			return bad(fmt.Sprintf("%q is not allowed in a branch or tag name", c))
		}
	}
	for _, part := range strings.Split(rev, "/") {
		switch {
		case part == "":
			return bad(`empty path component ("//")`)
		case strings.HasPrefix(part, "."):
			return bad(`a component must not start with "."`)
		case strings.HasSuffix(part, ".lock"):
			return bad(`a component must not end with ".lock"`)
		}
	}
	return nil
}

// Join joins elem under root and refuses a result that is not strictly below
// root (an element with "..", or an absolute one that Join would swallow):
// for paths built from data someone else wrote.
func Join(root string, elem ...string) (string, error) {
	clean := filepath.Clean(root)
	p := filepath.Join(append([]string{clean}, elem...)...)
	if !strings.HasPrefix(p, strings.TrimSuffix(clean, string(filepath.Separator))+string(filepath.Separator)) {
		return "", fmt.Errorf("%q leaves %s", filepath.Join(elem...), root)
	}
	return p, nil
}
