// Package kind holds the renderers of the Python kinds (http-server,
// tt-dit-server, vllm-plugin, vllm-fork), one file per kind, behind the
// Renderer interface: what a kind installs at build time, what it checks in
// the built image, the environment and working directory it adds. The
// builder renders the rest of a kind's build context (Dockerfile, serve and
// verify scripts, image config) around a Renderer, and tt-go-server has no
// renderer (the builder assembles it from our own binaries). Renderers are
// pure: no files, no network, no clock, so goldens pin their output.
package kind

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/ttmodel/tt-model/manifest"
)

// Image paths of the Python kinds, as upstream's image lays them out: the
// staged code/ overlays the tt-metal tree at /opt/tt-metal (which is also
// PYTHONPATH), so paths an author writes in verify statements
// (/opt/tt-metal/models/...) hold here.
const (
	CodeDir = "/opt/tt-metal"
	// CtxDir holds the install inputs (lock, local plugin and vLLM trees,
	// wheels) while install_engine.sh runs; it is removed after.
	CtxDir = "/ctx"
	// HomeDir is the tt account's home, the working directory of the kinds
	// that do not run from the code root.
	HomeDir = "/home/tt"
	// PytorchCPUIndex is where upstream's kinds take torch from: vLLM's PyPI
	// metadata names the CUDA build otherwise (gigabytes of nvidia-* wheels).
	PytorchCPUIndex = "https://download.pytorch.org/whl/cpu"
)

// Step is one step of a generated script: what it is for (named in
// progress and in errors) and its shell lines.
type Step struct {
	What  string
	Lines []string
}

// Input is everything a renderer reads: the manifest with its git refs
// pinned, and what staging found.
type Input struct {
	M *manifest.Manifest
	// Runtime is m.Runtime with every {repo, ref} under vllm and plugin given
	// its resolved "sha" (and a local plugin or vLLM tree its "sha"/"dirty").
	Runtime map[string]any
	// TorchPin is the torch version the local tt-metal tree pins in
	// tt_metal/python_env/requirements-dev.txt ("" when unknown).
	TorchPin string
	// Wheels are the file names staged under ctx/wheels/ (the vLLM wheel
	// first when runtime.vllm.wheel is set).
	Wheels []string
}

func (in Input) runtimeMap(key string) map[string]any {
	m, _ := in.Runtime[key].(map[string]any)
	return m
}

func (in Input) runtimeString(key string) string {
	s, _ := in.Runtime[key].(string)
	return s
}

// Renderer is what differs between the launcher kinds when their image is
// built; everything else (the Dockerfile, the serve scripts, the image
// config, both build paths) is shared. Argv, env and readiness are not here:
// they come from manifest.LaunchFor, the one place that decides them.
type Renderer interface {
	// InstallSteps are install_engine.sh's steps; none means nothing runs at
	// build time and the image is assembled without a daemon.
	InstallSteps(in Input) ([]Step, error)
	// Checks are the kind's own verify checks, run before the manifest's.
	Checks(in Input) []Step
	// ImageEnv is the kind's image environment beyond the common one.
	ImageEnv(in Input) [][2]string
	// WorkDir is the server's working directory in the image.
	WorkDir() string
	// InstallReadsCode says whether install_engine.sh reads code/ (an
	// extension installed from the tree), so code/ must be copied first.
	InstallReadsCode(in Input) bool
}

// For is the renderer of a Python kind; false for a kind without one
// (tt-go-server, or an unknown name).
func For(kind string) (Renderer, bool) {
	switch kind {
	case "http-server":
		return httpServerKind{}, true
	case "tt-dit-server":
		return ttDitKind{}, true
	case "vllm-plugin":
		return vllmPluginKind{}, true
	case "vllm-fork":
		return vllmForkKind{}, true
	}
	return nil, false
}

// PythonCheck runs a Python snippet with the interpreter the launchers use.
func PythonCheck(what, code string) Step {
	return Step{What: what, Lines: []string{`"$PYTHON" -c ` + ShQuote(code)}}
}

// ManifestChecks are the manifest's verify statements: Python, as upstream
// runs them (`"$VENV/bin/python" -c <statement>`).
func ManifestChecks(m *manifest.Manifest) []Step {
	var out []Step
	for i, v := range m.Verify {
		out = append(out, PythonCheck(fmt.Sprintf("verify[%d] %q", i, v), v))
	}
	return out
}

// pipInstall is one `tt_pip` line (install_engine.sh's wrapper over uv or
// pip) with its arguments quoted.
func pipInstall(prefix string, args ...string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = ShQuote(a)
	}
	line := "tt_pip " + strings.Join(q, " ")
	if prefix != "" {
		line = prefix + " " + line
	}
	return line
}

// lockStep installs runtime.lock, the frozen dependency set.
func lockStep() Step {
	return Step{What: "runtime.lock (requirements.lock)",
		Lines: []string{pipInstall("", "-r", CtxDir+"/requirements.lock", "--extra-index-url", PytorchCPUIndex)}}
}

var shSafe = regexp.MustCompile(`^[\w@%+=:,./-]+$`)

// ShQuote quotes s for a POSIX shell as Python's shlex.quote does.
func ShQuote(s string) string {
	if s == "" {
		return "''"
	}
	if shSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// ShJoin quotes every word of argv.
func ShJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = ShQuote(a)
	}
	return strings.Join(q, " ")
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}
