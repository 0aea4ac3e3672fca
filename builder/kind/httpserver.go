package kind

import (
	"fmt"
	"path"
	"strings"
)

// httpServerKind renders kind http-server: the model's own server, started
// by runtime.command. It installs no engine and no default HTTP stack:
// runtime.packages and runtime.lock are what the server needs beyond the
// base, so a package without them is assembled without a daemon.
type httpServerKind struct{}

func (httpServerKind) InstallSteps(in Input) ([]Step, error) {
	var steps []Step
	if in.runtimeString("lock") != "" {
		steps = append(steps, lockStep())
	}
	pkgs, err := StringList(in.Runtime["packages"], "runtime.packages")
	if err != nil {
		return nil, err
	}
	if len(pkgs) > 0 {
		steps = append(steps, Step{What: "runtime.packages (" + strings.Join(pkgs, ", ") + ")",
			Lines: []string{pipInstall("", pkgs...)}})
	}
	return steps, nil
}

// checks make sure the command can start: its program is on PATH and, for
// `python -m MODULE` or `python FILE`, the module resolves or the file
// shipped. An allowlist missing the server fails here, not at serve.
func (httpServerKind) Checks(in Input) []Step {
	argv, _ := StringList(in.Runtime["command"], "runtime.command")
	if len(argv) == 0 {
		return nil
	}
	prog := argv[0]
	steps := []Step{{What: fmt.Sprintf("runtime.command: %s is on PATH", prog),
		Lines: []string{"command -v " + ShQuote(prog)}}}
	if base := path.Base(prog); len(argv) > 1 && (base == "python" || strings.HasPrefix(base, "python3")) {
		switch {
		case argv[1] == "-m" && len(argv) > 2:
			steps = append(steps, PythonCheck(fmt.Sprintf("runtime.command: module %s resolves", argv[2]),
				fmt.Sprintf("import importlib.util; assert importlib.util.find_spec(%s), %s", pyQuote(argv[2]),
					pyQuote("no module "+argv[2]+" on the image's Python path"))))
		case strings.HasSuffix(argv[1], ".py"):
			steps = append(steps, Step{What: fmt.Sprintf("runtime.command: %s shipped", argv[1]),
				Lines: []string{"test -f " + ShQuote(argv[1])}})
		}
	}
	return steps
}

func (httpServerKind) ImageEnv(Input) [][2]string { return nil }

// workDir is the code root: runtime.command names its script relative to
// it (upstream's example: python models/demos/my_model/tools/server.py).
func (httpServerKind) WorkDir() string { return CodeDir }

func (httpServerKind) InstallReadsCode(in Input) bool { return readsCode(in.Runtime["packages"]) }

// readsCode says whether a package list installs something from code/.
func readsCode(v any) bool {
	pkgs, _ := StringList(v, "")
	for _, p := range pkgs {
		if strings.HasPrefix(p, CodeDir+"/") {
			return true
		}
	}
	return false
}

// StringList reads a YAML list of strings (absent: nil).
func StringList(v any, field string) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: want a list of strings", field)
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		s, ok := it.(string)
		if !ok {
			return nil, fmt.Errorf("%s[%d]: want a string, got %v", field, i, it)
		}
		out = append(out, s)
	}
	return out, nil
}

// pyQuote is a Python string literal for s.
func pyQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}
