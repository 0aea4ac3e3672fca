package spm

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"
)

// spaceSymbol is U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's escaped whitespace.
const spaceSymbol = "\u2581"

// normalizer reproduces SentencePiece's Normalizer::Normalize (offsets are not needed here).
type normalizer struct {
	spec     normalizerSpec
	suffix   bool // TrainerSpec.treat_whitespace_as_suffix
	trie     *doubleArray
	replaced string // NUL-separated replacement strings addressed by trie values
	user     *prefixMatcher
}

func newNormalizer(spec normalizerSpec, suffix bool, user *prefixMatcher) (*normalizer, error) {
	n := &normalizer{spec: spec, suffix: suffix, user: user}
	if len(spec.charsmap) == 0 {
		return n, nil
	}
	// Layout: <uint32 LE trie size in bytes><trie units><replacement strings, NUL terminated>.
	blob := spec.charsmap
	if len(blob) <= 4 {
		return nil, fmt.Errorf("precompiled_charsmap of %d bytes is too short", len(blob))
	}
	size := binary.LittleEndian.Uint32(blob)
	if uint64(size) >= uint64(len(blob)) {
		return nil, fmt.Errorf("precompiled_charsmap trie size %d exceeds blob of %d bytes", size, len(blob))
	}
	trie, err := newDoubleArray(blob[4 : 4+size])
	if err != nil {
		return nil, fmt.Errorf("precompiled_charsmap: %w", err)
	}
	n.trie = trie
	n.replaced = string(blob[4+size:])
	return n, nil
}

// normalizePrefix returns the normalized form of the longest rule matching the start of s and
// how many input bytes it consumed.
func (n *normalizer) normalizePrefix(s string) (string, int) {
	if l := n.user.match(s); l > 0 {
		return s[:l], l
	}
	if n.trie != nil {
		if v, l := n.trie.longestPrefix(s); l > 0 {
			if v >= len(n.replaced) {
				return "", l
			}
			r := n.replaced[v:]
			if end := strings.IndexByte(r, 0); end >= 0 {
				r = r[:end]
			}
			return r, l
		}
	}
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size <= 1 {
		// Malformed UTF-8: one byte becomes U+FFFD, as upstream does.
		return "\uFFFD", 1
	}
	return s[:size], size
}

func (n *normalizer) normalize(input string) string {
	if input == "" {
		return ""
	}
	if n.spec.removeExtraWhitespaces {
		for input != "" {
			p, l := n.normalizePrefix(input)
			if p != " " {
				break
			}
			input = input[l:]
		}
	}
	if input == "" {
		return ""
	}
	space := " "
	if n.spec.escapeWhitespaces {
		space = spaceSymbol
	}
	var out strings.Builder
	out.Grow(3 * len(input))
	if !n.suffix && n.spec.addDummyPrefix {
		out.WriteString(space)
	}
	prevSpace := n.spec.removeExtraWhitespaces
	for input != "" {
		p, l := n.normalizePrefix(input)
		if prevSpace {
			p = strings.TrimLeft(p, " ")
		}
		if p != "" {
			for i := 0; i < len(p); i++ {
				if n.spec.escapeWhitespaces && p[i] == ' ' {
					out.WriteString(spaceSymbol)
				} else {
					out.WriteByte(p[i])
				}
			}
			prevSpace = strings.HasSuffix(p, " ")
		}
		input = input[l:]
		if !n.spec.removeExtraWhitespaces {
			prevSpace = false
		}
	}
	s := out.String()
	if n.spec.removeExtraWhitespaces {
		for strings.HasSuffix(s, space) {
			s = s[:len(s)-len(space)]
		}
	}
	if n.suffix && n.spec.addDummyPrefix {
		s += space
	}
	return s
}
