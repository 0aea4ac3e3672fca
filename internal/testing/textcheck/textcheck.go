// Package textcheck holds the text comparisons the tests of several
// packages make: a golden file compared with what a test rendered (and
// rewritten with -update), and parts that must appear in a text in order.
package textcheck

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
)

// Golden compares got with the file at path; with update it first writes
// got there. regen is the command that rewrites the goldens, named when the
// file is missing or differs. A difference is reported line by line.
func Golden(t testing.TB, path string, got []byte, update bool, regen string) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (%s writes it)", err, regen)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the rendered text (rerun %s after checking the change):\n%s", path, regen, LineDiff(string(want), string(got)))
	}
}

// LineDiff lists the lines only in want (-), then those only in got (+).
func LineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// InOrder requires each of parts in s, each after the one before.
func InOrder(t testing.TB, s string, parts ...string) {
	t.Helper()
	at := 0
	for _, p := range parts {
		i := strings.Index(s[at:], p)
		if i < 0 {
			t.Errorf("%q missing (or out of order) in:\n%s", p, s)
			return
		}
		at += i + len(p)
	}
}
