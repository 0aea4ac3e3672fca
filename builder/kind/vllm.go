package kind

// What the two vLLM kinds (vllmplugin.go, vllmfork.go) share: the
// model's extension, the directory the plugin scans for models, and the
// checks of the serving stack.

// vllmOverrides resolve a hard conflict upstream pins: ttnn wants numpy<2,
// recent vLLM's opencv-python-headless wants numpy>=2, and vLLM reaches
// opencv only through a video path no TT model uses.
var vllmOverrides = []string{"numpy>=1.24.4,<2", "opencv-python-headless==4.11.0.86"}

// extensionStep installs runtime.extension, a pip-installable directory
// shipped in code/.
func extensionStep(in Input) []Step {
	ext := in.runtimeString("extension")
	if ext == "" {
		return nil
	}
	return []Step{{What: "the model's vLLM extension " + ext, Lines: []string{pipInstall("", CodeDir+"/"+ext)}}}
}

// extraModelsDir is the directory the plugin scans for per-model
// vllm_metadata.json files: runtime.extra_models_dir, else the extension's
// extra_models/, else none (the plugin's builtin registry).
func extraModelsDir(in Input) string {
	if emd := in.runtimeString("extra_models_dir"); emd != "" {
		return CodeDir + "/" + emd
	}
	if ext := in.runtimeString("extension"); ext != "" {
		return CodeDir + "/" + ext + "/extra_models"
	}
	return ""
}

// vllmEnv sets EXTRA_MODELS_DIR, and TT_VLLM_BUILTIN_MODELS=0 beside it, only
// when the model brings its own registration: "0" for a builtin-registry
// model would register no architecture at all.
func vllmEnv(in Input) [][2]string {
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
func vllmStackChecks(in Input) []Step {
	return append([]Step{PythonCheck("ttnn, vLLM and vllm_tt_plugin import", "import ttnn, vllm, vllm_tt_plugin")},
		torchChecks(in.TorchPin)...)
}

// pinnedRef is the resolved sha of a {repo, ref} entry, else its ref.
func pinnedRef(entry map[string]any) string {
	if sha := stringOf(entry["sha"]); sha != "" {
		return sha
	}
	return stringOf(entry["ref"])
}
