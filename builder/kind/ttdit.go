package kind

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// ttDitDefaultPackages is the HTTP stack upstream installs when
// runtime.packages is absent.
var ttDitDefaultPackages = []string{"fastapi", "uvicorn", "pydantic>=2", "pillow"}

var torchRequirementRE = regexp.MustCompile(`^torch\b`)

// ttDitKind renders kind tt-dit-server: an ASGI app shipped in code/,
// served by uvicorn. As upstream, an absent runtime.packages installs the
// default HTTP stack plus torch (tt-metal's pin when the tree declares one);
// unlike upstream, an explicit empty list installs nothing (the base brings
// the stack), so such a package is assembled without a daemon. The verify
// checks import the stack and the app either way.
type ttDitKind struct{}

func (ttDitKind) packages(in Input) ([]string, error) {
	pkgs, err := StringList(in.Runtime["packages"], "runtime.packages")
	if err != nil {
		return nil, err
	}
	if _, given := in.Runtime["packages"]; !given {
		pkgs = append([]string(nil), ttDitDefaultPackages...)
	}
	if len(pkgs) == 0 {
		return nil, nil
	}
	if slices.ContainsFunc(pkgs, torchRequirementRE.MatchString) {
		return pkgs, nil
	}
	// Nothing in an HTTP stack pulls torch in, and ttnn's extensions are
	// built against tt-metal's pinned one: install exactly that.
	torch := "torch"
	if in.TorchPin != "" {
		torch = "torch==" + in.TorchPin
	}
	return append([]string{torch}, pkgs...), nil
}

func (k ttDitKind) InstallSteps(in Input) ([]Step, error) {
	if in.runtimeString("lock") != "" {
		return []Step{lockStep()}, nil
	}
	pkgs, err := k.packages(in)
	if err != nil || len(pkgs) == 0 {
		return nil, err
	}
	return []Step{{What: "the HTTP stack (" + strings.Join(pkgs, ", ") + ")",
		Lines: []string{pipInstall("", append(pkgs, "--extra-index-url", PytorchCPUIndex)...)}}}, nil
}

func (k ttDitKind) Checks(in Input) []Step {
	steps := []Step{PythonCheck("the HTTP stack imports (fastapi, uvicorn, pydantic)", "import fastapi, uvicorn, pydantic")}
	if pkgs, _ := k.packages(in); in.runtimeString("lock") == "" && slices.ContainsFunc(pkgs, torchRequirementRE.MatchString) {
		steps = append(steps, torchChecks(in.TorchPin)...)
	}
	module, attr, _ := strings.Cut(in.runtimeString("app"), ":")
	// Resolve the ASGI attribute the way uvicorn will: an allowlist missing
	// the server package fails here, not on a consumer's first boot.
	steps = append(steps, PythonCheck(fmt.Sprintf("runtime.app %q imports", in.runtimeString("app")),
		fmt.Sprintf("import importlib; mod = importlib.import_module(%s); assert hasattr(mod, %s), %s",
			pyQuote(module), pyQuote(attr), pyQuote("imported "+module+" but it has no "+attr))))
	return steps
}

// torchChecks assert that torch is the CPU build from the CPU index and,
// when tt-metal declares a pin, that version.
func torchChecks(pin string) []Step {
	steps := []Step{PythonCheck("torch is the CPU build", "import torch; assert torch.__version__.endswith('+cpu'), torch.__version__")}
	if pin != "" {
		steps = append(steps, PythonCheck("torch is tt-metal's pin "+pin,
			fmt.Sprintf("import torch; v = torch.__version__.split('+')[0]; assert v == %s, "+
				"f'torch {v} is installed but tt-metal pins %s; ttnn extension modules were built against %s: pin it via runtime.lock'",
				pyQuote(pin), pin, pin)))
	}
	return steps
}

func (ttDitKind) ImageEnv(Input) [][2]string { return nil }
func (ttDitKind) WorkDir() string            { return HomeDir }

func (ttDitKind) InstallReadsCode(in Input) bool { return readsCode(in.Runtime["packages"]) }
