package kind

import "testing"

// TestShQuote quotes as Python's shlex.quote.
func TestShQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":                  "''",
		"plain-word_1.2/x:": "plain-word_1.2/x:",
		"two words":         "'two words'",
		"it's":              `'it'"'"'s'`,
		`{"tt": 1}`:         `'{"tt": 1}'`,
	} {
		if got := ShQuote(in); got != want {
			t.Errorf("ShQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
