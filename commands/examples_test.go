package commands

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestHelpExamplesParse: every command has an example in its --help, and
// every tt-model command line of every example parses against the real
// command tree (the command resolves, its flags exist, its arguments are
// what Args wants, its required flags are there); the server arguments
// after `--` (serve, supervise and service install of tt-model-server)
// parse against the server's own flag set.
func TestHelpExamplesParse(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := c.CommandPath()
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s: no example in --help", path)
		}
		own := false
		for _, line := range strings.Split(c.Example, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			for _, args := range exampleInvocations(t, line) {
				got, err := parseExample(args)
				if err != nil {
					t.Errorf("%s example %q: %v", path, line, err)
					continue
				}
				own = own || got == path || strings.HasPrefix(got, path+" ")
			}
		}
		if c.Example != "" && !own {
			t.Errorf("%s: no example line runs %s or one of its subcommands", path, path)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(io.Discard, io.Discard))
}

// TestExampleParserRejects: the parse the examples go through refuses what
// would fail when run: the server flag serve's example once had, a
// mistyped flag, a missing argument, an unknown subcommand.
func TestExampleParserRejects(t *testing.T) {
	for _, line := range []string{
		"tt-model serve acme/rf-detr --local-only -- --threads 4",
		"tt-model supervise -- tt-model-server --threads 4",
		"tt-model serve build/rf-detr --prot 3",
		"tt-model validate",
		"tt-model weights pul build/rf-detr",
	} {
		for _, args := range exampleInvocations(t, line) {
			if _, err := parseExample(args); err == nil {
				t.Errorf("%q parses", line)
			}
		}
	}
}

// exampleInvocations are the tt-model command lines of a shell line: its
// pipeline and && parts that run tt-model, without leading VAR=value
// assignments or sudo.
func exampleInvocations(t *testing.T, line string) [][]string {
	t.Helper()
	words, err := shellWords(line)
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	var out [][]string
	var part []string
	flush := func() {
		for len(part) > 0 && (part[0] == "sudo" || strings.Contains(part[0], "=") && !strings.HasPrefix(part[0], "-")) {
			part = part[1:]
		}
		if len(part) > 0 && part[0] == "tt-model" {
			out = append(out, part[1:])
		}
		part = nil
	}
	for _, w := range words {
		switch w {
		case "|", "||", "&&", ";":
			flush()
		default:
			part = append(part, w)
		}
	}
	flush()
	return out
}

// shellWords splits a line as sh does for the plain words, quotes and
// backslashes examples use.
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed %c", quote)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// parseExample parses args against a fresh command tree as Execute would,
// without running the command, and returns the command's path.
func parseExample(args []string) (string, error) {
	root := newRoot(io.Discard, io.Discard)
	c, rest, err := root.Find(args)
	if err != nil {
		return "", err
	}
	if err := c.ParseFlags(rest); err != nil {
		return "", err
	}
	if err := c.ValidateArgs(c.Flags().Args()); err != nil {
		return "", err
	}
	if err := c.ValidateRequiredFlags(); err != nil {
		return "", err
	}
	if err := c.ValidateFlagGroups(); err != nil {
		return "", err
	}
	if dash := c.ArgsLenAtDash(); dash >= 0 {
		server := c.Flags().Args()[dash:]
		switch c.Name() {
		case "serve":
		case "supervise", "install":
			if len(server) == 0 || filepath.Base(server[0]) != "tt-model-server" {
				server = nil // another program: its flags are its own
			} else {
				server = server[1:]
			}
		}
		if err := checkServerArgs(server); err != nil {
			return "", err
		}
	}
	return c.CommandPath(), nil
}
