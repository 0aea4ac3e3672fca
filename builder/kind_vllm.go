package builder

import (
	"fmt"
	"strings"
)

// What the two vLLM kinds share: the model's extension, the directory the
// plugin scans for models, and the checks of the serving stack.

// vllmOverrides resolve a hard conflict upstream pins: ttnn wants numpy<2,
// recent vLLM's opencv-python-headless wants numpy>=2, and vLLM reaches
// opencv only through a video path no TT model uses.
var vllmOverrides = []string{"numpy>=1.24.4,<2", "opencv-python-headless==4.11.0.86"}

// extensionStep installs runtime.extension, a pip-installable directory
// shipped in code/.
func extensionStep(in kindInput) []scriptStep {
	ext := in.runtimeString("extension")
	if ext == "" {
		return nil
	}
	return []scriptStep{{What: "the model's vLLM extension " + ext, Lines: []string{pipInstall("", codeImageDir+"/"+ext)}}}
}

// extraModelsDir is the directory the plugin scans for per-model
// vllm_metadata.json files: runtime.extra_models_dir, else the extension's
// extra_models/, else none (the plugin's builtin registry).
func extraModelsDir(in kindInput) string {
	if emd := in.runtimeString("extra_models_dir"); emd != "" {
		return codeImageDir + "/" + emd
	}
	if ext := in.runtimeString("extension"); ext != "" {
		return codeImageDir + "/" + ext + "/extra_models"
	}
	return ""
}

// vllmEnv sets EXTRA_MODELS_DIR, and TT_VLLM_BUILTIN_MODELS=0 beside it, only
// when the model brings its own registration: "0" for a builtin-registry
// model would register no architecture at all.
func vllmEnv(in kindInput) [][2]string {
	emd := extraModelsDir(in)
	if emd == "" {
		return nil
	}
	return [][2]string{{"EXTRA_MODELS_DIR", emd}, {"TT_VLLM_BUILTIN_MODELS", "0"}}
}

// resolveExtraModels does what the plugin and then vLLM do with
// EXTRA_MODELS_DIR: find each model's vllm_metadata.json, put its folder on
// sys.path and import its main_class, so a model that would register
// nothing, or an unimportable one, fails the build.
const resolveExtraModels = `import importlib, json, os, sys
md = os.environ['EXTRA_MODELS_DIR']
found = 0
for entry in sorted(os.listdir(md)):
    folder = os.path.join(md, entry)
    meta_path = os.path.join(folder, 'vllm_metadata.json')
    if not os.path.exists(meta_path):
        continue
    found += 1
    with open(meta_path) as f:
        spec = json.load(f)['main_class']
    if folder not in sys.path:
        sys.path.append(folder)
    module, sep, cls = spec.rpartition(':')
    if not sep:
        module, _, cls = spec.rpartition('.')
    assert getattr(importlib.import_module(module), cls) is not None, spec
    print('resolved', spec)
assert found, f'EXTRA_MODELS_DIR {md} registers no models'`

// vllmStackChecks are the imports both vLLM kinds need: ttnn (the plugin
// activates only when it imports), vLLM and the plugin, torch's CPU build and
// tt-metal's pin.
func vllmStackChecks(in kindInput) []scriptStep {
	return append([]scriptStep{pythonCheck("ttnn, vLLM and vllm_tt_plugin import", "import ttnn, vllm, vllm_tt_plugin")},
		torchChecks(in.TorchPin)...)
}

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
func (vllmPluginKind) workDir() string                   { return homeDir }
func (vllmPluginKind) installReadsCode(in kindInput) bool {
	return in.runtimeString("extension") != ""
}

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
func (vllmForkKind) workDir() string                    { return homeDir }
func (vllmForkKind) installReadsCode(in kindInput) bool { return in.runtimeString("extension") != "" }

// pinnedRef is the resolved sha of a {repo, ref} entry, else its ref.
func pinnedRef(entry map[string]any) string {
	if sha := stringOf(entry["sha"]); sha != "" {
		return sha
	}
	return stringOf(entry["ref"])
}
