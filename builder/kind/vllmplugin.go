package kind

import (
	"fmt"
	"strings"
)

// vllmPluginKind renders kind vllm-plugin: stock vLLM (built from source
// with VLLM_TARGET_DEVICE=empty, or the author's wheel or tree) plus the
// standalone Tenstorrent plugin. It always installs at build time.
type vllmPluginKind struct{}

func (vllmPluginKind) InstallSteps(in Input) ([]Step, error) {
	vllm := in.runtimeMap("vllm")
	var steps []Step
	switch {
	case stringOf(vllm["wheel"]) != "":
		if len(in.Wheels) == 0 {
			return nil, fmt.Errorf("runtime.vllm.wheel: no wheel was staged")
		}
		steps = append(steps, Step{What: "vLLM from the wheel " + in.Wheels[0],
			Lines: []string{pipInstall("", CtxDir+"/wheels/"+in.Wheels[0], "--extra-index-url", PytorchCPUIndex)}})
	case stringOf(vllm["path"]) != "":
		steps = append(steps, Step{What: "vLLM from the local tree " + stringOf(vllm["path"]),
			Lines: []string{pipInstall("VLLM_TARGET_DEVICE=empty", CtxDir+"/vllm-src", "--extra-index-url", PytorchCPUIndex)}})
	default:
		version := stringOf(vllm["version"])
		what := fmt.Sprintf("vLLM %s (vllm==%s, built from source with VLLM_TARGET_DEVICE=empty)", version, version)
		if in.runtimeString("lock") != "" {
			// The lock is the dependency set: vLLM goes in without deps.
			steps = append(steps, lockStep(), Step{What: what,
				Lines: []string{pipInstall("VLLM_TARGET_DEVICE=empty", "--no-deps", "--no-binary", "vllm", "vllm=="+version)}})
			break
		}
		overrides := append([]string(nil), vllmOverrides...)
		extra, err := StringList(in.Runtime["overrides"], "runtime.overrides")
		if err != nil {
			return nil, err
		}
		overrides = append(overrides, extra...)
		steps = append(steps, Step{What: what, Lines: []string{
			"printf '%s\\n' " + ShJoin(overrides) + " > /tmp/tt-overrides.txt",
			pipInstall("VLLM_TARGET_DEVICE=empty", "--no-binary", "vllm", "vllm=="+version,
				"--override", "/tmp/tt-overrides.txt", "--extra-index-url", PytorchCPUIndex),
		}})
	}
	// transformers imports torchaudio when it is merely installed, and the
	// one that comes with CPU torch does not load.
	steps = append(steps, Step{What: "remove torchaudio (it does not load beside CPU torch)",
		Lines: []string{"tt_pip_uninstall torchaudio || true"}})

	plugin := in.runtimeMap("plugin")
	switch {
	case stringOf(plugin["version"]) != "":
		v := stringOf(plugin["version"])
		steps = append(steps, Step{What: "vllm-tt-plugin " + v, Lines: []string{pipInstall("", "vllm-tt-plugin=="+v)}})
	case stringOf(plugin["path"]) != "":
		steps = append(steps, Step{What: "vllm-tt-plugin from the local checkout " + stringOf(plugin["path"]),
			Lines: []string{pipInstall("", CtxDir+"/plugin-src")}})
	default:
		repo, sha := stringOf(plugin["repo"]), pinnedRef(plugin)
		steps = append(steps, Step{What: fmt.Sprintf("vllm-tt-plugin %s at %s", repo, sha), Lines: []string{
			"git clone " + ShQuote(repo) + " /tmp/vllm-tt-plugin",
			"git -C /tmp/vllm-tt-plugin checkout " + ShQuote(sha),
			pipInstall("", "/tmp/vllm-tt-plugin"),
			"rm -rf /tmp/vllm-tt-plugin",
		}})
	}
	steps = append(steps, extensionStep(in)...)
	extra := in.Wheels
	if stringOf(vllm["wheel"]) != "" {
		extra = extra[1:] // the first is vLLM's, installed above
	}
	if len(extra) > 0 {
		// Last, so they win over anything resolved above.
		paths := make([]string, len(extra))
		for i, w := range extra {
			paths[i] = CtxDir + "/wheels/" + w
		}
		steps = append(steps, Step{What: "runtime.wheels (" + strings.Join(extra, ", ") + ")", Lines: []string{pipInstall("", paths...)}})
	}
	return steps, nil
}

func (vllmPluginKind) Checks(in Input) []Step {
	steps := vllmStackChecks(in)
	// The plugin installs non-editable: vLLM must not resolve into the tree.
	steps = append(steps, PythonCheck("vLLM is installed, not imported from the tt-metal tree",
		"import vllm; assert '/tt-metal/' not in vllm.__file__, vllm.__file__"))
	if extraModelsDir(in) != "" {
		steps = append(steps, PythonCheck("every model in EXTRA_MODELS_DIR resolves", resolveExtraModels))
	}
	return steps
}

func (vllmPluginKind) ImageEnv(in Input) [][2]string { return vllmEnv(in) }
func (vllmPluginKind) WorkDir() string               { return HomeDir }
func (vllmPluginKind) InstallReadsCode(in Input) bool {
	return in.runtimeString("extension") != ""
}
