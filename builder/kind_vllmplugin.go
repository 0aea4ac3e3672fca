package builder

import (
	"fmt"
	"strings"
)

// vllmPluginKind renders kind vllm-plugin: stock vLLM (built from source
// with VLLM_TARGET_DEVICE=empty, or the author's wheel or tree) plus the
// standalone Tenstorrent plugin. It always installs at build time.
type vllmPluginKind struct{}

func (vllmPluginKind) installSteps(in kindInput) ([]scriptStep, error) {
	vllm := in.runtimeMap("vllm")
	var steps []scriptStep
	switch {
	case stringOf(vllm["wheel"]) != "":
		if len(in.Wheels) == 0 {
			return nil, fmt.Errorf("runtime.vllm.wheel: no wheel was staged")
		}
		steps = append(steps, scriptStep{What: "vLLM from the wheel " + in.Wheels[0],
			Lines: []string{pipInstall("", ctxImageDir+"/wheels/"+in.Wheels[0], "--extra-index-url", pytorchCPUIndex)}})
	case stringOf(vllm["path"]) != "":
		steps = append(steps, scriptStep{What: "vLLM from the local tree " + stringOf(vllm["path"]),
			Lines: []string{pipInstall("VLLM_TARGET_DEVICE=empty", ctxImageDir+"/vllm-src", "--extra-index-url", pytorchCPUIndex)}})
	default:
		version := stringOf(vllm["version"])
		what := fmt.Sprintf("vLLM %s (vllm==%s, built from source with VLLM_TARGET_DEVICE=empty)", version, version)
		if in.runtimeString("lock") != "" {
			// The lock is the dependency set: vLLM goes in without deps.
			steps = append(steps, lockStep(), scriptStep{What: what,
				Lines: []string{pipInstall("VLLM_TARGET_DEVICE=empty", "--no-deps", "--no-binary", "vllm", "vllm=="+version)}})
			break
		}
		overrides := append([]string(nil), vllmOverrides...)
		extra, err := stringList(in.Runtime["overrides"], "runtime.overrides")
		if err != nil {
			return nil, err
		}
		overrides = append(overrides, extra...)
		steps = append(steps, scriptStep{What: what, Lines: []string{
			"printf '%s\\n' " + shJoin(overrides) + " > /tmp/tt-overrides.txt",
			pipInstall("VLLM_TARGET_DEVICE=empty", "--no-binary", "vllm", "vllm=="+version,
				"--override", "/tmp/tt-overrides.txt", "--extra-index-url", pytorchCPUIndex),
		}})
	}
	// transformers imports torchaudio when it is merely installed, and the
	// one that comes with CPU torch does not load.
	steps = append(steps, scriptStep{What: "remove torchaudio (it does not load beside CPU torch)",
		Lines: []string{"tt_pip_uninstall torchaudio || true"}})

	plugin := in.runtimeMap("plugin")
	switch {
	case stringOf(plugin["version"]) != "":
		v := stringOf(plugin["version"])
		steps = append(steps, scriptStep{What: "vllm-tt-plugin " + v, Lines: []string{pipInstall("", "vllm-tt-plugin=="+v)}})
	case stringOf(plugin["path"]) != "":
		steps = append(steps, scriptStep{What: "vllm-tt-plugin from the local checkout " + stringOf(plugin["path"]),
			Lines: []string{pipInstall("", ctxImageDir+"/plugin-src")}})
	default:
		repo, sha := stringOf(plugin["repo"]), pinnedRef(plugin)
		steps = append(steps, scriptStep{What: fmt.Sprintf("vllm-tt-plugin %s at %s", repo, sha), Lines: []string{
			"git clone " + shQuote(repo) + " /tmp/vllm-tt-plugin",
			"git -C /tmp/vllm-tt-plugin checkout " + shQuote(sha),
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
			paths[i] = ctxImageDir + "/wheels/" + w
		}
		steps = append(steps, scriptStep{What: "runtime.wheels (" + strings.Join(extra, ", ") + ")", Lines: []string{pipInstall("", paths...)}})
	}
	return steps, nil
}

func (vllmPluginKind) checks(in kindInput) []scriptStep {
	steps := vllmStackChecks(in)
	// The plugin installs non-editable: vLLM must not resolve into the tree.
	steps = append(steps, pythonCheck("vLLM is installed, not imported from the tt-metal tree",
		"import vllm; assert '/tt-metal/' not in vllm.__file__, vllm.__file__"))
	if extraModelsDir(in) != "" {
		steps = append(steps, pythonCheck("every model in EXTRA_MODELS_DIR resolves", resolveExtraModels))
	}
	return steps
}

func (vllmPluginKind) imageEnv(in kindInput) [][2]string { return vllmEnv(in) }
func (vllmPluginKind) workDir() string                   { return ImageHomeDir }
func (vllmPluginKind) installReadsCode(in kindInput) bool {
	return in.runtimeString("extension") != ""
}
