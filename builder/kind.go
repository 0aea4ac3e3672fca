package builder

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/ttmodel/tt-model/manifest"
)

// Image paths of the Python kinds (http-server, tt-dit-server, vllm-plugin,
// vllm-fork), as upstream's image lays them out: the staged code/ overlays
// the tt-metal tree at /opt/tt-metal (which is also PYTHONPATH), so paths an
// author writes in verify statements (/opt/tt-metal/models/...) hold here.
const (
	codeImageDir     = "/opt/tt-metal"
	scriptsImageDir  = "/usr/local/share/tt-model"
	verifyImagePath  = scriptsImageDir + "/verify.sh"
	installImagePath = scriptsImageDir + "/install_engine.sh"
	serveScriptDir   = "/usr/local/bin"
	// ctxImageDir holds the install inputs (lock, local plugin and vLLM
	// trees, wheels) while install_engine.sh runs; it is removed after.
	ctxImageDir = "/ctx"
	// pytorchCPUIndex is where upstream's kinds take torch from: vLLM's PyPI
	// metadata names the CUDA build otherwise (gigabytes of nvidia-* wheels).
	pytorchCPUIndex = "https://download.pytorch.org/whl/cpu"
	// noChipsEnv tells a serve-<profile>.sh that the host has no chips on
	// purpose, so it starts the server without /dev/tenstorrent.
	noChipsEnv = "TT_MODEL_NO_CHIPS"
)

// scriptStep is one step of a generated script: what it is for (named in
// progress and in errors) and its shell lines.
type scriptStep struct {
	What  string
	Lines []string
}

// kindInput is everything a kind renderer reads: the manifest with its git
// refs pinned, and what staging found. Renderers are pure: no files, no
// network, no clock, so goldens pin their output.
type kindInput struct {
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

func (in kindInput) runtimeMap(key string) map[string]any {
	m, _ := in.Runtime[key].(map[string]any)
	return m
}

func (in kindInput) runtimeString(key string) string {
	s, _ := in.Runtime[key].(string)
	return s
}

// kindRenderer is what differs between the launcher kinds when their image
// is built; everything else (the Dockerfile, the serve scripts, the image
// config, both build paths) is shared. Argv, env and readiness are not here:
// they come from manifest.LaunchFor, the one place that decides them.
type kindRenderer interface {
	// installSteps are install_engine.sh's steps; none means nothing runs at
	// build time and the image is assembled without a daemon.
	installSteps(in kindInput) ([]scriptStep, error)
	// checks are the kind's own verify checks, run before the manifest's.
	checks(in kindInput) []scriptStep
	// imageEnv is the kind's image environment beyond the common one.
	imageEnv(in kindInput) [][2]string
	// workDir is the server's working directory in the image.
	workDir() string
	// installReadsCode says whether install_engine.sh reads code/ (an
	// extension installed from the tree), so code/ must be copied first.
	installReadsCode(in kindInput) bool
}

// kindRenderers are the Python kinds' renderers; tt-go-server has its own
// builder (package.go).
var kindRenderers = map[string]kindRenderer{
	"http-server":   httpServerKind{},
	"tt-dit-server": ttDitKind{},
	"vllm-plugin":   vllmPluginKind{},
	"vllm-fork":     vllmForkKind{},
}

// pythonCheck runs a Python snippet with the interpreter the launchers use.
func pythonCheck(what, code string) scriptStep {
	return scriptStep{What: what, Lines: []string{`"$PYTHON" -c ` + shQuote(code)}}
}

// manifestChecks are the manifest's verify statements: Python, as upstream
// runs them (`"$VENV/bin/python" -c <statement>`).
func manifestChecks(m *manifest.Manifest) []scriptStep {
	var out []scriptStep
	for i, v := range m.Verify {
		out = append(out, pythonCheck(fmt.Sprintf("verify[%d] %q", i, v), v))
	}
	return out
}

// pipInstall is one `tt_pip` line (install_engine.sh's wrapper over uv or
// pip) with its arguments quoted.
func pipInstall(prefix string, args ...string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shQuote(a)
	}
	line := "tt_pip " + strings.Join(q, " ")
	if prefix != "" {
		line = prefix + " " + line
	}
	return line
}

// lockStep installs runtime.lock, the frozen dependency set.
func lockStep() scriptStep {
	return scriptStep{What: "runtime.lock (requirements.lock)",
		Lines: []string{pipInstall("", "-r", ctxImageDir+"/requirements.lock", "--extra-index-url", pytorchCPUIndex)}}
}

var shSafe = regexp.MustCompile(`^[\w@%+=:,./-]+$`)

// shQuote quotes s for a POSIX shell as Python's shlex.quote does.
func shQuote(s string) string {
	if s == "" {
		return "''"
	}
	if shSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// shJoin quotes every word of argv.
func shJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shQuote(a)
	}
	return strings.Join(q, " ")
}
