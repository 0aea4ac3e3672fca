package manifest

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ttmodel/tt-model/server/api"
)

// KindGoServer is this tool's kind: an image built around tt-model-server.
const KindGoServer = "tt-go-server"

// GoServerModels are the models tt-model-server runs (runtime.model): the
// kinds of its route table.
func GoServerModels() []string { return api.Kinds() }

// kind is what one launcher kind requires of a manifest and how it starts
// its server. Everything here is pure: no environment, files or clock.
type kind struct {
	name        string
	required    []string // serve fields a resolved profile must carry
	runtimeKeys []string
	readyLine   string // log substring that marks the boot done
	readyPath   string // HTTP path whose JSON status "ok" marks the boot done
	// validate checks the runtime block against the rest of the manifest.
	validate func(c *collector, m *Manifest, k *kind)
	// argv renders the server command line for a resolved profile.
	argv func(runtime map[string]any, weightsRepo string, p Profile, port int) ([]string, error)
	// meshShapeEnv names the variable carrying the mesh shape ("" = none).
	meshShapeEnv func(runtime map[string]any) string
	// meshDeviceEnv says whether MESH_DEVICE is exported.
	meshDeviceEnv bool
	// meshDeviceFirst puts MESH_DEVICE before HF_MODEL, the order upstream's
	// vllm-plugin launcher writes them in.
	meshDeviceFirst bool
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// kinds is the closed table of launcher kinds: the four upstream ones and ours.
var kinds = map[string]*kind{
	"vllm-plugin": {
		name:            "vllm-plugin",
		required:        []string{"hardware", "mesh_device", "max_num_seqs", "block_size"},
		runtimeKeys:     []string{"vllm", "plugin", "extension", "extra_models_dir", "lock", "overrides", "wheels", "base"},
		readyLine:       "Application startup complete",
		validate:        validateVllmPlugin,
		argv:            vllmPluginArgv,
		meshDeviceEnv:   true,
		meshDeviceFirst: true,
	},
	"vllm-fork": {
		name:        "vllm-fork",
		required:    []string{"hardware", "mesh_device", "max_num_seqs", "block_size"},
		runtimeKeys: []string{"vllm", "extension", "lock", "model_dir", "base"},
		readyLine:   "Server ready at",
		validate:    validateVllmFork,
		argv:        vllmForkArgv,
	},
	"tt-dit-server": {
		name:          "tt-dit-server",
		required:      []string{"hardware", "mesh_device"},
		runtimeKeys:   []string{"app", "packages", "lock", "mesh_shape_env", "base"},
		readyLine:     "Application startup complete",
		validate:      validateTTDit,
		argv:          ttDitArgv,
		meshShapeEnv:  func(rt map[string]any) string { return stringOr(rt["mesh_shape_env"], "FLUX2_MESH_SHAPE") },
		meshDeviceEnv: true,
	},
	"http-server": {
		name:          "http-server",
		required:      []string{"hardware", "mesh_device"},
		runtimeKeys:   []string{"command", "ready_line", "packages", "lock", "mesh_shape_env", "base"},
		validate:      validateHTTPServer,
		argv:          httpServerArgv,
		meshShapeEnv:  func(rt map[string]any) string { return stringOr(rt["mesh_shape_env"], "TT_MESH_SHAPE") },
		meshDeviceEnv: true,
	},
	KindGoServer: {
		name:          KindGoServer,
		required:      []string{"hardware", "mesh_device"},
		runtimeKeys:   []string{"model", "base", "server"},
		readyPath:     "/health",
		validate:      validateGoServer,
		argv:          goServerArgv,
		meshShapeEnv:  func(map[string]any) string { return "TT_MESH_SHAPE" },
		meshDeviceEnv: true,
	},
}

// KindNames lists the known kinds, sorted.
func KindNames() []string { return slices.Sorted(maps.Keys(kinds)) }

// RequiredServeFields lists the serve fields a resolved profile of kind must
// carry. An unknown kind gets upstream's historical set, so the bad kind is
// reported on its own and not masked by complaints about engine settings.
func RequiredServeFields(kindName string) []string {
	if k, ok := kinds[kindName]; ok {
		return k.required
	}
	return []string{"hardware", "mesh_device", "max_num_seqs", "block_size"}
}

// Launch is how a kind starts its server for one resolved profile.
type Launch struct {
	Argv []string
	Env  map[string]string
	// EnvOrder lists every key of Env once, in the kind's order: the
	// variables the kind derives (HF_MODEL, MESH_DEVICE, the mesh shape),
	// then the profile's env sorted by name. Generated scripts export them
	// in this order.
	EnvOrder  []string
	Port      int
	ReadyLine string // log substring that means ready ("" when ReadyPath is used)
	ReadyPath string // HTTP path whose JSON "status" is "ok" when ready
}

// FirstHostPort is the first host port `tt-model serve` publishes a server
// on, as upstream's serve: the runner searches for a free one from it, and a
// model card's quickstart names it.
const FirstHostPort = 20000

// LaunchFor renders the server argv, env and readiness probe of a kind.
func LaunchFor(kindName string, runtime map[string]any, weightsRepo string, p Profile) (Launch, error) {
	k, ok := kinds[kindName]
	if !ok {
		return Launch{}, fmt.Errorf("unsupported kind %q; supported: %s", kindName, strings.Join(KindNames(), ", "))
	}
	port := 8000
	if p.Port != nil {
		port = *p.Port
	}
	argv, err := k.argv(runtime, weightsRepo, p, port)
	if err != nil {
		return Launch{}, err
	}
	env := map[string]string{}
	var order []string
	set := func(key, v string) {
		if _, ok := env[key]; !ok {
			order = append(order, key)
		}
		env[key] = v
	}
	meshDevice := k.meshDeviceEnv && p.MeshDevice != ""
	if meshDevice && k.meshDeviceFirst {
		set("MESH_DEVICE", p.MeshDevice)
	}
	set("HF_MODEL", weightsRepo)
	if meshDevice && !k.meshDeviceFirst {
		set("MESH_DEVICE", p.MeshDevice)
	}
	if p.MeshDevice != "" && k.meshShapeEnv != nil {
		r, c, err := MeshShape(p.MeshDevice)
		if err != nil {
			return Launch{}, err
		}
		set(k.meshShapeEnv(runtime), fmt.Sprintf("%dx%d", r, c))
	}
	for _, key := range slices.Sorted(maps.Keys(p.Env)) {
		set(key, p.Env[key])
	}
	ready := k.readyLine
	if kindName == "http-server" {
		ready = stringOr(runtime["ready_line"], "")
	}
	return Launch{Argv: argv, Env: env, EnvOrder: order, Port: port, ReadyLine: ready, ReadyPath: k.readyPath}, nil
}

func stringOr(v any, def string) string {
	if s, ok := v.(string); ok && s != "" {
		return s
	}
	return def
}

// asMap reads runtime.<key> as a mapping; absent is an empty map, a wrong
// type is reported.
func asMap(c *collector, rt map[string]any, key string) map[string]any {
	v, ok := rt[key]
	if !ok || v == nil {
		return map[string]any{}
	}
	m, ok := v.(map[string]any)
	if !ok {
		c.addf("runtime."+key, "must be a mapping, got %s", goTypeName(v))
		return map[string]any{}
	}
	return m
}

func truthy(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case string:
		return t != ""
	case bool:
		return t
	case int64:
		return t != 0
	case float64:
		return t != 0
	case []any:
		return len(t) > 0
	case map[string]any:
		return len(t) > 0
	}
	return true
}

func goTypeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64, float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

// checkRuntimeKeys refuses runtime keys the kind does not understand, but
// those in specific, which the caller reports with a better message.
func checkRuntimeKeys(c *collector, m *Manifest, k *kind, specific ...string) {
	allowed := map[string]bool{}
	for _, key := range specific {
		allowed[key] = true
	}
	for _, key := range k.runtimeKeys {
		allowed[key] = true
	}
	keys := slices.Sorted(maps.Keys(m.Runtime))
	for _, key := range keys {
		if !allowed[key] {
			c.addf("runtime."+key, "kind %s does not understand this key (want one of %s)", k.name, strings.Join(k.runtimeKeys, ", "))
		}
	}
}

// coveredBySourceCode reports whether dir is one of source.code or under one.
func coveredBySourceCode(m *Manifest, dir string) bool {
	for _, c := range m.Source.Code {
		if dir == c || strings.HasPrefix(dir, strings.TrimRight(c, "/")+"/") {
			return true
		}
	}
	return false
}

func validateVllmPlugin(c *collector, m *Manifest, k *kind) {
	validateBase(c, m)
	checkRuntimeKeys(c, m, k)
	vllm := asMap(c, m.Runtime, "vllm")
	if truthy(vllm["repo"]) {
		c.addf("runtime.vllm.repo", "describes the tenstorrent/vllm fork, which is kind vllm-fork: set kind: vllm-fork, or give runtime.vllm.version / .wheel / .path")
	}
	oneOf(c, "runtime.vllm", "kind vllm-plugin requires runtime.vllm as exactly one of {version}, {wheel}, {path}",
		map[string]bool{"version": truthy(vllm["version"]), "wheel": truthy(vllm["wheel"]), "path": truthy(vllm["path"])})
	plugin := asMap(c, m.Runtime, "plugin")
	oneOf(c, "runtime.plugin", "kind vllm-plugin requires runtime.plugin as exactly one of {path}, {repo, ref}, {version}",
		map[string]bool{"path": truthy(plugin["path"]), "{repo, ref}": truthy(plugin["repo"]) && truthy(plugin["ref"]), "version": truthy(plugin["version"])})
	if emd, ok := m.Runtime["extra_models_dir"].(string); ok && emd != "" && !coveredBySourceCode(m, emd) {
		c.addf("runtime.extra_models_dir", "%q is not covered by source.code: the plugin would scan a directory that never entered the image", emd)
	}
}

// oneOf reports unless exactly one of the named sources is set.
func oneOf(c *collector, path, missing string, set map[string]bool) {
	var chosen []string
	for _, name := range slices.Sorted(maps.Keys(set)) {
		if set[name] {
			chosen = append(chosen, name)
		}
	}
	switch {
	case len(chosen) == 0:
		c.addf(path, "%s", missing)
	case len(chosen) > 1:
		c.addf(path, "give exactly one of %s, got %s", strings.Join(slices.Sorted(maps.Keys(set)), " / "), strings.Join(chosen, " and "))
	}
}

func validateVllmFork(c *collector, m *Manifest, k *kind) {
	validateBase(c, m)
	checkRuntimeKeys(c, m, k, "plugin")
	vllm := asMap(c, m.Runtime, "vllm")
	switch {
	case truthy(vllm["version"]) && !truthy(vllm["repo"]):
		c.addf("runtime.vllm.version", "describes stock vLLM from PyPI, which is kind vllm-plugin: set kind: vllm-plugin, or give runtime.vllm.{repo, ref} for the fork")
	case !(truthy(vllm["repo"]) && truthy(vllm["ref"])):
		c.addf("runtime.vllm", "kind vllm-fork requires runtime.vllm.{repo, ref}: the tenstorrent/vllm fork pinned to the sha the model was validated with")
	}
	if truthy(m.Runtime["plugin"]) {
		c.addf("runtime.plugin", "kind vllm-fork takes no runtime.plugin: the plugin comes from the fork's own plugins/vllm-tt-plugin")
	}
	md, _ := m.Runtime["model_dir"].(string)
	switch {
	case md == "":
		c.addf("runtime", "kind vllm-fork requires runtime.model_dir (the model's directory in the tt-metal tree)")
	case !coveredBySourceCode(m, md):
		c.addf("runtime.model_dir", "%q is not covered by source.code: the launcher would not find the model inside the image", md)
	}
}

func validateTTDit(c *collector, m *Manifest, k *kind) {
	validateBase(c, m)
	checkRuntimeKeys(c, m, k)
	app, ok := m.Runtime["app"].(string)
	if !ok || !strings.Contains(app, ":") {
		c.addf("runtime.app", `kind tt-dit-server requires runtime.app, the ASGI target, as "module.path:attribute"`)
	} else {
		top := strings.Split(strings.SplitN(app, ":", 2)[0], ".")[0]
		if !shipsTopLevel(m, top) {
			c.addf("runtime.app", "%q lives under %q, which no source.code or extra_code path ships", app, top)
		}
	}
	validateMeshShapeEnv(c, m)
}

// shipsTopLevel reports whether any allowlist path (source.code or
// extra_code) starts with the top-level package top.
func shipsTopLevel(m *Manifest, top string) bool {
	for _, p := range allCodePaths(m) {
		if strings.Split(p, "/")[0] == top {
			return true
		}
	}
	return false
}

func allCodePaths(m *Manifest) []string {
	paths := append([]string(nil), m.Source.Code...)
	for _, e := range m.Source.ExtraCode {
		paths = append(paths, e.Paths...)
	}
	return paths
}

func validateMeshShapeEnv(c *collector, m *Manifest) {
	v, ok := m.Runtime["mesh_shape_env"]
	if !ok || v == nil {
		return
	}
	if s, isStr := v.(string); !isStr || !envNameRE.MatchString(s) {
		c.addf("runtime.mesh_shape_env", "%v is not a valid environment variable name (letters, digits and '_', not starting with a digit)", v)
	}
}

func validateHTTPServer(c *collector, m *Manifest, k *kind) {
	validateBase(c, m)
	checkRuntimeKeys(c, m, k)
	cmd, ok := m.Runtime["command"].([]any)
	if !ok || len(cmd) == 0 {
		c.addf("runtime.command", "kind http-server requires runtime.command, the server argv as a list of strings (with {host} and {port} placeholders)")
	} else {
		for i, a := range cmd {
			if _, isStr := a.(string); !isStr {
				c.addf(indexPath("runtime.command", i), "must be a string, got %s", goTypeName(a))
			}
		}
	}
	if s, ok := m.Runtime["ready_line"].(string); !ok || s == "" {
		c.addf("runtime.ready_line", "kind http-server requires runtime.ready_line, the log substring that marks the boot done")
	}
	validateMeshShapeEnv(c, m)
}

// validateBase checks runtime.base, the base image the builder layers the
// package on (every kind: upstream builds its own tt-metal image instead, so
// a manifest meant for both tools gives the base with --base).
func validateBase(c *collector, m *Manifest) {
	if v, present := m.Runtime["base"]; present {
		if s, isStr := v.(string); !isStr || s == "" {
			c.addf("runtime.base", "must be a non-empty string, got %s", goTypeName(v))
		}
	}
}

func validateGoServer(c *collector, m *Manifest, k *kind) {
	checkRuntimeKeys(c, m, k)
	model, ok := m.Runtime["model"].(string)
	valid := false
	for _, name := range GoServerModels() {
		valid = valid || model == name
	}
	if !ok || !valid {
		c.addf("runtime.model", "kind %s requires runtime.model, one of %s (got %v)", KindGoServer, strings.Join(GoServerModels(), ", "), m.Runtime["model"])
	}
	validateBase(c, m)
	if v, present := m.Runtime["server"]; present {
		if s, isStr := v.(string); !isStr || s == "" {
			c.addf("runtime.server", "must be a non-empty string, got %s", goTypeName(v))
		}
	}
}

func capabilityArgv(p Profile) []string {
	if p.Capabilities == nil {
		return nil
	}
	var argv []string
	if p.Capabilities.ToolParser != "" {
		argv = append(argv, "--enable-auto-tool-choice", "--tool-call-parser", p.Capabilities.ToolParser)
	}
	if p.Capabilities.ReasoningParser != "" {
		argv = append(argv, "--reasoning_parser", p.Capabilities.ReasoningParser)
	}
	return argv
}

func vllmPluginArgv(_ map[string]any, weights string, p Profile, port int) ([]string, error) {
	if p.MaxNumSeqs == nil || p.BlockSize == nil {
		return nil, fmt.Errorf("kind vllm-plugin needs max_num_seqs and block_size")
	}
	argv := []string{"vllm", "serve", weights}
	if p.MaxModelLen != nil {
		argv = append(argv, "--max-model-len", strconv.Itoa(*p.MaxModelLen))
	}
	argv = append(argv, "--max-num-seqs", strconv.Itoa(*p.MaxNumSeqs), "--block-size", strconv.Itoa(*p.BlockSize))
	if len(p.AdditionalConfig) > 0 {
		argv = append(argv, "--additional-config", pythonJSON(p.AdditionalConfig))
	}
	argv = append(argv, capabilityArgv(p)...)
	argv = append(argv, p.FlatArgs()...)
	return append(argv, "--port", strconv.Itoa(port)), nil
}

func vllmForkArgv(rt map[string]any, weights string, p Profile, port int) ([]string, error) {
	r, c, err := MeshShape(p.MeshDevice)
	if err != nil {
		return nil, err
	}
	md, _ := rt["model_dir"].(string)
	if md == "" {
		return nil, fmt.Errorf("kind vllm-fork requires runtime.model_dir")
	}
	if p.MaxNumSeqs == nil || p.BlockSize == nil {
		return nil, fmt.Errorf("kind vllm-fork needs max_num_seqs and block_size")
	}
	argv := []string{"python", "-m", "models.common.readiness_check.run_vllm_server", "--stages", "serve",
		"--model-dir", md, "--hf-model", weights, "--mesh-device", fmt.Sprintf("(%d, %d)", r, c),
		"--max-num-seqs", strconv.Itoa(*p.MaxNumSeqs)}
	if p.MaxModelLen != nil {
		argv = append(argv, "--max-model-len", strconv.Itoa(*p.MaxModelLen))
	}
	argv = append(argv, "--block-size", strconv.Itoa(*p.BlockSize))
	if p.ServerTimeout != nil {
		argv = append(argv, "--server-timeout", strconv.Itoa(*p.ServerTimeout))
	}
	argv = append(argv, "--port", strconv.Itoa(port))
	if tt, ok := p.AdditionalConfig["tt"]; ok && truthy(tt) {
		argv = append(argv, "--tt-config", pythonJSON(tt))
	}
	if extra := append(p.FlatArgs(), capabilityArgv(p)...); len(extra) > 0 {
		argv = append(argv, "--additional-server-args", strings.Join(extra, " "))
	}
	return argv, nil
}

func ttDitArgv(rt map[string]any, _ string, p Profile, port int) ([]string, error) {
	app, _ := rt["app"].(string)
	if app == "" {
		return nil, fmt.Errorf("kind tt-dit-server requires runtime.app")
	}
	argv := []string{"python", "-m", "uvicorn", "--host", "0.0.0.0", "--port", strconv.Itoa(port), "--lifespan", "on"}
	argv = append(argv, p.FlatArgs()...)
	return append(argv, app), nil
}

func httpServerArgv(rt map[string]any, _ string, p Profile, port int) ([]string, error) {
	cmd, _ := rt["command"].([]any)
	if len(cmd) == 0 {
		return nil, fmt.Errorf("kind http-server requires runtime.command")
	}
	repl := strings.NewReplacer("{host}", "0.0.0.0", "{port}", strconv.Itoa(port))
	argv := make([]string, 0, len(cmd))
	for _, a := range cmd {
		argv = append(argv, repl.Replace(fmt.Sprint(a)))
	}
	return append(argv, p.FlatArgs()...), nil
}

func goServerArgv(_ map[string]any, _ string, p Profile, port int) ([]string, error) {
	argv := []string{"tt-model-server", "--host", "0.0.0.0", "--port", strconv.Itoa(port)}
	return append(argv, p.FlatArgs()...), nil
}
