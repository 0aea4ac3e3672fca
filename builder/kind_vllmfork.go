package builder

import "fmt"

// vllmForkDir is where the fork is checked out; its editable install points
// there, so it stays in the image.
const vllmForkDir = "/opt/vllm"

// vllmForkKind renders kind vllm-fork: the tenstorrent/vllm fork with its
// in-tree plugin, both installed editable at the pinned sha, launched by
// tt-metal's readiness runner. It always installs at build time.
type vllmForkKind struct{}

func (vllmForkKind) installSteps(in kindInput) ([]scriptStep, error) {
	vllm := in.runtimeMap("vllm")
	repo, sha := stringOf(vllm["repo"]), pinnedRef(vllm)
	steps := []scriptStep{{What: fmt.Sprintf("the vLLM fork %s at %s", repo, sha), Lines: []string{
		"git clone " + shQuote(repo) + " " + vllmForkDir,
		"git -C " + vllmForkDir + " checkout " + shQuote(sha),
	}}}
	var deps []string
	if in.runtimeString("lock") != "" {
		steps = append(steps, lockStep())
		deps = []string{"--no-deps"}
	}
	steps = append(steps,
		scriptStep{What: "vLLM (the fork, editable, VLLM_TARGET_DEVICE=empty)", Lines: []string{
			pipInstall("VLLM_TARGET_DEVICE=empty", append(deps, "-e", vllmForkDir, "--extra-index-url", pytorchCPUIndex)...)}},
		scriptStep{What: "vllm-tt-plugin (the fork's plugins/vllm-tt-plugin, editable)", Lines: []string{
			pipInstall("", "-e", vllmForkDir+"/plugins/vllm-tt-plugin")}},
		scriptStep{What: "drop the fork's .git (the editable install needs the tree only)", Lines: []string{"rm -rf " + vllmForkDir + "/.git"}},
	)
	return append(steps, extensionStep(in)...), nil
}

func (vllmForkKind) checks(in kindInput) []scriptStep {
	steps := vllmStackChecks(in)
	steps = append(steps,
		pythonCheck("vLLM is the fork at "+vllmForkDir, fmt.Sprintf("import vllm; assert vllm.__file__.startswith(%s), vllm.__file__", pyQuote(vllmForkDir))),
		pythonCheck("tt-metal's readiness runner imports", "import models.common.readiness_check.run_vllm_server"))
	if extraModelsDir(in) != "" {
		steps = append(steps, pythonCheck("every model in EXTRA_MODELS_DIR resolves", resolveExtraModels))
	}
	return steps
}

func (vllmForkKind) imageEnv(in kindInput) [][2]string  { return vllmEnv(in) }
func (vllmForkKind) workDir() string                    { return ImageHomeDir }
func (vllmForkKind) installReadsCode(in kindInput) bool { return in.runtimeString("extension") != "" }
