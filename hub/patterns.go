package hub

import "strings"

// Filter keeps the repository paths selected by allow and ignore patterns with
// the semantics of huggingface_hub's filter_repo_objects: a path is kept when
// it matches at least one allow pattern (or there are none) and no ignore
// pattern. A pattern ending in "/" selects everything under that folder.
// Matching is Python's fnmatch on POSIX: case-sensitive, and "*" crosses "/".
func Filter(paths, allow, ignore []string) []string {
	allow = expandFolderPatterns(allow)
	ignore = expandFolderPatterns(ignore)
	var kept []string
	for _, p := range paths {
		if len(allow) > 0 && !matchAny(p, allow) {
			continue
		}
		if matchAny(p, ignore) {
			continue
		}
		kept = append(kept, p)
	}
	return kept
}

// expandFolderPatterns turns "dir/" into "dir/*", as huggingface_hub does.
func expandFolderPatterns(patterns []string) []string {
	out := make([]string, len(patterns))
	for i, p := range patterns {
		if strings.HasSuffix(p, "/") {
			p += "*"
		}
		out[i] = p
	}
	return out
}

func matchAny(name string, patterns []string) bool {
	for _, p := range patterns {
		if Fnmatch(name, p) {
			return true
		}
	}
	return false
}

// Fnmatch reports whether name matches the shell pattern as Python's
// fnmatch.fnmatchcase does: "*" matches any run of characters (including
// "/"), "?" one character, "[seq]" / "[!seq]" a set with ranges; a "[" with no
// closing "]" is a literal.
func Fnmatch(name, pattern string) bool {
	n, p := []rune(name), []rune(pattern)
	// Iterative matching with one backtrack point for the last "*", which is
	// enough because "*" matches any character.
	ni, pi := 0, 0
	starP, starN := -1, 0
	for ni < len(n) {
		if pi < len(p) {
			switch p[pi] {
			case '*':
				starP, starN = pi, ni
				pi++
				continue
			case '?':
				ni++
				pi++
				continue
			case '[':
				if ok, width, valid := matchClass(n[ni], p[pi:]); valid {
					if ok {
						ni++
						pi += width
						continue
					}
				} else if n[ni] == '[' {
					ni++
					pi++
					continue
				}
			default:
				if p[pi] == n[ni] {
					ni++
					pi++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starN++
		ni, pi = starN, starP+1
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matchClass matches c against the bracket expression at the start of p.
// It returns whether c matched, the width of the expression in runes, and
// whether the expression is well formed (closed by "]").
func matchClass(c rune, p []rune) (matched bool, width int, valid bool) {
	i := 1
	negate := false
	if i < len(p) && p[i] == '!' {
		negate = true
		i++
	}
	// A "]" right after "[" or "[!" is a member, not the end.
	start := i
	for j := i; j < len(p); j++ {
		if p[j] == ']' && j > start {
			width = j + 1
			break
		}
	}
	if width == 0 {
		return false, 0, false
	}
	set := p[start : width-1]
	for k := 0; k < len(set); k++ {
		if k+2 < len(set) && set[k+1] == '-' {
			if set[k] <= c && c <= set[k+2] {
				matched = true
			}
			k += 2
			continue
		}
		if set[k] == c {
			matched = true
		}
	}
	return matched != negate, width, true
}
