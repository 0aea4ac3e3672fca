// Package suggest names the known words nearest a mistyped one: the flags of
// a command line, the fields of a manifest mapping.
package suggest

import "strings"

// MaxDistance is the largest edit distance a suggestion may have (cobra's
// default for commands).
const MaxDistance = 2

// Near returns the names within MaxDistance edits of typed, or that start
// with it, in the order given; typed itself is never among them.
func Near(typed string, names []string) []string {
	var out []string
	for _, n := range names {
		if n == typed {
			continue
		}
		if Distance(typed, n) <= MaxDistance || (len(typed) > 1 && strings.HasPrefix(n, typed)) {
			out = append(out, n)
		}
	}
	return out
}

// Distance is the Levenshtein distance of a and b, case-insensitive.
func Distance(a, b string) int {
	ra, rb := []rune(strings.ToLower(a)), []rune(strings.ToLower(b))
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
