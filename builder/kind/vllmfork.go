package kind

import "fmt"

// vllmForkDir is where the fork is checked out; its editable install points
// there, so it stays in the image.
const vllmForkDir = "/opt/vllm"

// vllmForkKind renders kind vllm-fork: the tenstorrent/vllm fork with its
// in-tree plugin, both installed editable at the pinned sha, launched by
// tt-metal's readiness runner. It always installs at build time.
type vllmForkKind struct{}

func (vllmForkKind) InstallSteps(in Input) ([]Step, error) {
	vllm := in.runtimeMap("vllm")
	repo, sha := stringOf(vllm["repo"]), pinnedRef(vllm)
	steps := []Step{{What: fmt.Sprintf("the vLLM fork %s at %s", repo, sha), Lines: []string{
		"git clone " + ShQuote(repo) + " " + vllmForkDir,
		"git -C " + vllmForkDir + " checkout " + ShQuote(sha),
	}}}
	var deps []string
	if in.runtimeString("lock") != "" {
		steps = append(steps, lockStep())
		deps = []string{"--no-deps"}
	}
	steps = append(steps,
		Step{What: "vLLM (the fork, editable, VLLM_TARGET_DEVICE=empty)", Lines: []string{
			pipInstall("VLLM_TARGET_DEVICE=empty", append(deps, "-e", vllmForkDir, "--extra-index-url", PytorchCPUIndex)...)}},
		Step{What: "vllm-tt-plugin (the fork's plugins/vllm-tt-plugin, editable)", Lines: []string{
			pipInstall("", "-e", vllmForkDir+"/plugins/vllm-tt-plugin")}},
		Step{What: "drop the fork's .git (the editable install needs the tree only)", Lines: []string{"rm -rf " + vllmForkDir + "/.git"}},
	)
	return append(steps, extensionStep(in)...), nil
}

func (vllmForkKind) Checks(in Input) []Step {
	steps := vllmStackChecks(in)
	steps = append(steps,
		PythonCheck("vLLM is the fork at "+vllmForkDir, fmt.Sprintf("import vllm; assert vllm.__file__.startswith(%s), vllm.__file__", pyQuote(vllmForkDir))),
		PythonCheck("tt-metal's readiness runner imports", "import models.common.readiness_check.run_vllm_server"))
	if extraModelsDir(in) != "" {
		steps = append(steps, PythonCheck("every model in EXTRA_MODELS_DIR resolves", resolveExtraModels))
	}
	return steps
}

func (vllmForkKind) ImageEnv(in Input) [][2]string  { return vllmEnv(in) }
func (vllmForkKind) WorkDir() string                { return HomeDir }
func (vllmForkKind) InstallReadsCode(in Input) bool { return in.runtimeString("extension") != "" }
