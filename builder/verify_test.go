package builder

import (
	"archive/tar"
	"reflect"
	"strings"
	"testing"
)

func TestSplitWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "tt-model --version", want: []string{"tt-model", "--version"}},
		{in: "  a   'b c'  \"d e\"  f\\ g ", want: []string{"a", "b c", "d e", "f g"}},
		{in: `x --flag=value "q\"uote"`, want: []string{"x", "--flag=value", `q"uote`}},
		{in: "a''b", want: []string{"ab"}},
		{in: "", want: nil},
		{in: "a | b", err: "needs a shell"},
		{in: "a && b", err: "needs a shell"},
		{in: "echo $HOME", err: "needs a shell"},
		{in: `echo "$HOME"`, err: "needs a shell"},
		{in: "ls *.so", err: "needs a shell"},
		{in: "~/x", err: "needs a shell"},
		{in: "'open", err: "unterminated"},
		{in: `"open`, err: "unterminated"},
	} {
		got, err := splitWords(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("splitWords(%q) = %q, %v; want an error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestVerifySteps(t *testing.T) {
	scratch := map[string]byte{"/usr/local/bin/tt-model": tar.TypeReg, "/usr/local/bin": tar.TypeDir}
	steps, err := verifySteps([]string{"tt-model --version"}, scratch, defaultPATH)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{serverImagePath, "--verify"}, {"/usr/local/bin/tt-model", "--version"}}
	if len(steps) != 2 || !reflect.DeepEqual([][]string{steps[0].Argv, steps[1].Argv}, want) {
		t.Errorf("steps %+v, want %q", steps, want)
	}
	if _, err := verifySteps([]string{"python3 -c 1"}, scratch, defaultPATH); err == nil || !strings.Contains(err.Error(), "python3 is not on the image's PATH") {
		t.Errorf("missing command: %v", err)
	}
	withShell := map[string]byte{"/bin/sh": tar.TypeReg}
	steps, err = verifySteps([]string{"tt-model --version | grep 1"}, withShell, defaultPATH)
	if err != nil || !reflect.DeepEqual(steps[1].Argv, []string{"/bin/sh", "-ceu", "tt-model --version | grep 1"}) {
		t.Errorf("with a shell: %+v, %v", steps, err)
	}
}
