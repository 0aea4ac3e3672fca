package spm

// prefixMatcher finds the longest user-defined symbol at the start of a string. User-defined
// symbols are never normalized or split, as in SentencePiece's PrefixMatcher.
type prefixMatcher struct {
	symbols map[string]bool
	maxLen  int
}

func newPrefixMatcher(symbols []string) *prefixMatcher {
	m := &prefixMatcher{symbols: make(map[string]bool, len(symbols))}
	for _, s := range symbols {
		if s == "" {
			continue
		}
		m.symbols[s] = true
		m.maxLen = max(m.maxLen, len(s))
	}
	return m
}

// match returns the byte length of the longest symbol that prefixes s, or 0.
func (m *prefixMatcher) match(s string) int {
	if m == nil || m.maxLen == 0 {
		return 0
	}
	for l := min(m.maxLen, len(s)); l > 0; l-- {
		if m.symbols[s[:l]] {
			return l
		}
	}
	return 0
}

// oneCharLen is SentencePiece's OneCharLen: the UTF-8 sequence length implied by the lead byte.
func oneCharLen(b byte) int {
	switch {
	case b < 0xC0:
		return 1
	case b < 0xE0:
		return 2
	case b < 0xF0:
		return 3
	default:
		return 4
	}
}
