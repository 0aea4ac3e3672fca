package pi05

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/models/pi05"
	"github.com/ttmodel/tt-model/models/pi05/serving"
	"github.com/ttmodel/tt-model/server"
	"github.com/ttmodel/tt-model/server/api"
)

// MaxBodyBytes bounds a pi0.5 request: four 640x480 frames as JSON arrays are about 15 MB.
const MaxBodyBytes = 64 << 20

// Options configure the pi0.5 model behind the server.
type Options struct {
	Getenv func(string) string // os.Getenv in production: PI05_*, TT_*, HF_MODEL, HF cache
	// Environ lists the environment (os.Environ in production): a PI05_* variable nobody reads
	// is refused at start, a TT_* one is named as having no effect. nil skips the check.
	Environ func() []string
	// Build packs the weights (pi05native.Builder: the C megakernels).
	Build pi05.Builder
	// Precision names the kernels' arithmetic Build uses (PI05_PRECISION), for /info.
	Precision string
	// Fault is the test-only fault switch's device part (hang, delay).
	Fault server.Fault
	// CPUs are the CPUs the devices may use (default: this process's affinity mask).
	CPUs    []int
	Version string // the server binary's version, reported by /info
}

// Model serves the original pi0.5 package's API (POST /predict) and SGLang's action API
// (POST /v1/actions/generations, GET /v1/actions/metadata, JSON or msgpack, and its websocket),
// and OpenPI's websocket, on the serving engine's devices (models/pi05/serving).
type Model struct {
	opts  Options
	srv   pi05.ServerConfig
	cfg   serving.Config
	log   *slog.Logger
	slots chan struct{}    // PI05_HTTP_THREADS: requests being prepared or run at once
	exit  chan int         // the engine's exit code, once it has an engine
	env   server.EnvReport // what the start says of the environment (its notices are on /info too)

	mu      sync.Mutex // guards what Load sets while /info and /health read
	policy  *pi05.Policy
	devices []*pi05.Device
	engine  *serving.Engine
	dir     string
	rev     string // the revision loaded: TT_WEIGHTS_REVISION, else the commit of the snapshot folder
	test    string // the notice of generated test weights (server.TestWeightsReporter)

	ws *wsHub // the open websockets
}

// New reads the PI05_* and TT_* environment (every bad value named); nothing is loaded until
// Load.
func New(opts Options) (*Model, error) {
	if opts.CPUs == nil {
		opts.CPUs = processCPUs()
	}
	read := map[string]bool{}
	getenv := func(k string) string { read[k] = true; return opts.Getenv(k) }
	srv, err := pi05.ServerConfigFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	_, _ = srv.ResolveWeightsDir(getenv) // only to learn the variables it reads
	cfg, err := serving.FromEnv(serving.Env{Getenv: getenv, CPUs: opts.CPUs, ActionRows: pi05.ActionRows(srv.ActionHorizon)})
	if err != nil {
		return nil, err
	}
	if opts.Fault.Kind == "hang" && opts.Fault.Device >= cfg.Devices || opts.Fault.Kind == "delay" && opts.Fault.Device >= cfg.Devices {
		return nil, fmt.Errorf("TT_MODEL_FAULT=%s: there are %d devices (0..%d)", opts.Fault, cfg.Devices, cfg.Devices-1)
	}
	m := &Model{opts: opts, srv: srv, cfg: cfg, log: slog.Default(), slots: make(chan struct{}, cfg.HTTPThreads),
		exit: make(chan int, 1), env: server.EnvReport{Notices: cfg.Notices, Info: cfg.Info}, ws: newWSHub()}
	if opts.Environ != nil {
		rep, err := envRules(read).Check(opts.Environ())
		if err != nil {
			return nil, err
		}
		m.env.Notices, m.env.Info, m.env.Chips = append(m.env.Notices, rep.Notices...), append(m.env.Info, rep.Info...), rep.Chips
	}
	return m, nil
}

// processCPUs is this process's affinity mask.
func processCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return []int{0}
	}
	var out []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out
}

// Name is the served repository, as the original package's /health reports it.
func (m *Model) Name() string { return m.srv.HFModel }

// Load finds the weights (PI05_WEIGHTS_DIR or the HF cache), checks and packs them once, makes the
// layout's devices (each its own threads, scratch and slabs), warms every device up, calibrates
// them under an SLO, and opens the scheduler.
func (m *Model) Load(ctx context.Context, log *slog.Logger) error {
	start := time.Now()
	m.log = log
	m.env.Say(log)
	if m.opts.Fault.Kind == "hang" || m.opts.Fault.Kind == "delay" {
		log.Warn("test-only fault switch armed", "TT_MODEL_FAULT", m.opts.Fault.String())
	}
	dir, err := m.srv.ResolveWeightsDir(m.opts.Getenv)
	if err != nil {
		return err
	}
	rev := m.srv.Revision
	if _, commit, ok := hub.SnapshotOf(dir); ok && !hub.IsCommit(rev) {
		rev = commit
	}
	test := ""
	if what, ok := hub.TestWeightsIn(dir); ok {
		test = hub.TestWeightsNotice(m.srv.HFModel, what)
		log.Warn("RANDOM TEST WEIGHTS", "weights", test)
	}
	m.mu.Lock()
	m.dir, m.rev, m.test = dir, rev, test
	m.mu.Unlock()
	log.Info("loading pi05", "dir", dir, "precision", m.opts.Precision, "cameras", m.srv.NumImages,
		"horizon", m.srv.ActionHorizon, "steps", m.srv.NumSteps, "layout", m.cfg.Layout, "devices", m.cfg.Devices,
		"threads_per_device", m.cfg.Threads)
	p, err := pi05.LoadPolicy(ctx, m.srv, dir, m.opts.Build, log)
	if err != nil {
		return err
	}
	devs, err := m.newDevices(p)
	if err != nil {
		p.Close()
		return err
	}
	f := m.opts.Fault
	fault := serving.Fault{DelayDevice: -1}
	switch f.Kind {
	case "hang":
		fault.HangDevice, fault.HangAfter = f.Device, f.After
	case "delay":
		fault.DelayDevice, fault.Delay = f.Device, f.Delay
	}
	sdevs := make([]serving.Device, len(devs))
	for i, d := range devs {
		if d != nil {
			sdevs[i] = serving.PolicyDevice(d)
		}
	}
	eng, err := serving.New(m.cfg, sdevs, fault, log)
	if err != nil {
		closeDevices(devs)
		p.Close()
		return err
	}
	m.mu.Lock()
	m.policy, m.devices, m.engine = p, devs, eng
	m.mu.Unlock()
	go func() {
		if code, ok := <-eng.Exit(); ok {
			m.exit <- code
		}
	}()
	sample, host, err := warmupRequest(p)
	if err != nil {
		return fmt.Errorf("warm-up request: %w", err)
	}
	if err := eng.Start(ctx, sample, host, time.Since(start)); err != nil {
		return err
	}
	return nil
}

// newDevices makes the layout's devices from the policy's weights (nil for a device the layout
// leaves idle), each pinned to its CPUs when the configuration gives them.
func (m *Model) newDevices(p *pi05.Policy) ([]*pi05.Device, error) {
	devs := make([]*pi05.Device, m.cfg.Devices)
	for i := range devs {
		used, maxBatch, slots := m.cfg.DeviceShape(i)
		if !used {
			continue
		}
		d, err := p.NewDevice(m.cfg.Threads, maxBatch, slots)
		if err == nil && m.cfg.CPUs != nil {
			err = d.Pin(m.cfg.CPUs[i])
		}
		if err != nil {
			closeDevices(devs)
			return nil, fmt.Errorf("device %d: %w", i, err)
		}
		devs[i] = d
		m.log.Info("pi05 device", "device", i, "threads", d.Threads(), "cpus", m.cfg.CPUs != nil, "max_batch", maxBatch,
			"slots", d.Slots(), "scratch_bytes", d.ScratchBytes())
	}
	return devs, nil
}

func closeDevices(devs []*pi05.Device) {
	for _, d := range devs {
		if d != nil {
			d.Close()
		}
	}
}

// warmupRequest prepares one full request (all cameras, a short prompt, seeded noise) and
// measures the host time of preparing it (the median of 5), for the SLO's predictions.
func warmupRequest(p *pi05.Policy) (*pi05.Prepared, time.Duration, error) {
	side := p.Dims.Image
	frame := pi05.RGB{H: side, W: side, Pix: make([]uint8, 3*side*side)}
	imgs := make([]pi05.RGB, p.Server.NumImages)
	for i := range imgs {
		imgs[i] = frame
	}
	seed := uint64(0)
	var times []time.Duration
	var in *pi05.Prepared
	for range 5 {
		t0 := time.Now()
		var err error
		if in, err = p.Prepare(&pi05.Request{Images: imgs, Prompt: "warm up", Seed: &seed}); err != nil {
			return nil, 0, err
		}
		times = append(times, time.Since(t0))
	}
	slices.Sort(times)
	return in, times[len(times)/2], nil
}

func (m *Model) current() (*pi05.Policy, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.policy, m.dir
}

// running is the serving engine, nil until Load made it.
func (m *Model) running() *serving.Engine {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.engine
}

// Device describes where inference runs; "" until loaded.
func (m *Model) Device() string {
	p, _ := m.current()
	if p == nil {
		return ""
	}
	k := p.Kernels()
	return fmt.Sprintf("cpu (%s, %s, %s: %d devices x %d threads)", k.ISA, k.Precision, m.cfg.Layout, m.cfg.Devices, m.cfg.Threads)
}

// Health is the engine's: ok, degraded (a dp device quarantined) or hung.
func (m *Model) Health() string {
	if e := m.running(); e != nil {
		return e.Health()
	}
	return "ok"
}

// HealthDetail lists the devices' states and the hangs seen.
func (m *Model) HealthDetail() map[string]any {
	e := m.running()
	if e == nil {
		return nil
	}
	in := e.Info()
	devs := make([]map[string]any, len(in.Devices))
	for i, d := range in.Devices {
		devs[i] = map[string]any{"id": d.ID, "role": d.Role, "state": d.State}
	}
	return map[string]any{"layout": in.Layout, "devices": devs, "hangs": in.Watchdog.Hangs}
}

// Exit delivers the hang exit code once the engine has drained after a hang.
func (m *Model) Exit() <-chan int { return m.exit }

// Hung reports whether a device hung (its stuck call keeps the devices from being closed).
func (m *Model) Hung() bool {
	e := m.running()
	return e != nil && e.Quarantined()
}

// NativeBytes is the memory the kernels hold outside the Go heap: the packed weights and every
// device's scratch and slabs (NativeMemory).
func (m *Model) NativeBytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.policy == nil {
		return 0
	}
	n := m.policy.Kernels().PackedBytes
	for _, d := range m.devices {
		if d != nil {
			n += d.ScratchBytes()
		}
	}
	return n
}

// HangExitCode is PI05_HANG_EXIT_CODE.
func (m *Model) HangExitCode() int { return m.cfg.Hang.ExitCode }

// Close ends the websockets (each after its request in progress), then stops the engine and frees
// the devices and the weights.
func (m *Model) Close() error {
	m.ws.shutdown()
	if !m.ws.wait(time.Minute) {
		m.log.Warn("websockets still busy after a minute: the device is left to the process exit")
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.engine != nil {
		m.engine.Close()
	}
	closeDevices(m.devices)
	if m.policy != nil {
		m.policy.Close()
	}
	m.engine, m.devices, m.policy = nil, nil, nil
	return nil
}

// revision is the weights' revision: the one loaded, else (before) TT_WEIGHTS_REVISION.
func (m *Model) revision() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rev != "" {
		return m.rev
	}
	return m.srv.Revision
}

// TestWeights is the notice of generated test weights (TestWeightsReporter).
func (m *Model) TestWeights() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.test
}

func (m *Model) owner() string {
	if org, _, ok := strings.Cut(m.srv.HFModel, "/"); ok {
		return org
	}
	return "tt-model"
}

// ModelCards is the one served repository.
func (m *Model) ModelCards() []server.ModelCard {
	return []server.ModelCard{{ID: m.srv.HFModel, Object: "model", OwnedBy: m.owner()}}
}

// megakernelInfo is /info's megakernel: the kernels, the preset, and the serving engine (layout,
// devices, megakernel.slo, the watchdog, the chip-program settings recorded).
type megakernelInfo struct {
	Backend     string      `json:"backend"`
	ISA         string      `json:"isa"`
	Precision   string      `json:"precision"`
	PackedBytes int64       `json:"packed_weight_bytes"`
	Preset      pi05.Preset `json:"preset"`
	Stages      []string    `json:"stages"`
	Threads     int         `json:"threads_per_device"`
	Scratch     []int64     `json:"device_scratch_bytes"`
	serving.Info
}

// Info is the body of GET /info.
func (m *Model) Info() map[string]any {
	p, dir := m.current()
	e := m.running()
	presets := []map[string]any{}
	for _, b := range pi05.PromptBuckets(m.srv.NumImages) {
		presets = append(presets, map[string]any{"cameras": m.srv.NumImages, "prompt_bucket": b, "action_rows": pi05.ActionRows(m.srv.ActionHorizon)})
	}
	info := map[string]any{
		"model":  m.srv.HFModel,
		"status": "starting",
		"config": map[string]any{
			"PI05_NUM_IMAGES": m.srv.NumImages, "PI05_ACTION_HORIZON": m.srv.ActionHorizon,
			"PI05_NUM_STEPS": m.srv.NumSteps, "PI05_TOKEN_LEN": nilIfZero(m.srv.TokenLen), "PI05_PRECISION": m.opts.Precision,
			"HF_MODEL": m.srv.HFModel, "TT_WEIGHTS_REVISION": server.NilIfEmpty(m.srv.Revision), "PI05_WEIGHTS_DIR": server.NilIfEmpty(m.srv.WeightsDir),
			"PI05_LAYOUT": m.cfg.Layout, "devices": m.cfg.Devices, "threads_per_device": m.cfg.Threads,
		},
		"notices":  m.env.Notices,
		"presets":  presets,
		"weights":  map[string]any{"dir": server.NilIfEmpty(dir), "revision": server.NilIfEmpty(m.revision())},
		"hardware": "cpu",
		"server":   map[string]any{"name": "tt-model-server", "version": m.opts.Version},
	}
	if p != nil && e != nil {
		info["status"] = e.Health()
		info["device"] = m.Device()
		info["dims"] = p.Dims
		info["cameras"] = p.Config.Cameras()
		info["action_dim"] = p.Config.ActionDim()
		info["token_len"] = p.Server.TokenLen
		info["normalization"] = map[string]any{"normalized_actions": p.Norm.Action == nil, "files": p.Norm.Files}
		info["tokenizer"] = map[string]any{"path": m.srv.TokenizerPath(dir), "pieces": p.Tokenizer.Size(), "bos": p.Tokenizer.BOS()}
		k := p.Kernels()
		mk := megakernelInfo{Backend: "cpu", ISA: k.ISA, Precision: k.Precision, PackedBytes: k.PackedBytes, Preset: p.Preset,
			Stages: []string{"vision", "prefix", "expert"}, Threads: m.cfg.Threads, Info: e.Info()}
		m.mu.Lock()
		for _, d := range m.devices {
			var b int64
			if d != nil {
				b = d.ScratchBytes()
			}
			mk.Scratch = append(mk.Scratch, b)
		}
		m.mu.Unlock()
		info["megakernel"] = mk
	}
	return info
}

// Routes binds the pi0.5 routes of the route table (api.ModelRoutes) to their handlers.
func (m *Model) Routes() []server.Route {
	return server.BindRoutes(api.KindPI05, map[string]server.RouteHandler{
		"predict": m.predict, "actions_generations": m.generate, "actions_metadata": m.metadata,
		"actions_realtime": m.realtime, "openpi_policy": m.openpi, "openpi_policy_root": m.openpi,
		"openpi_healthz": m.healthz,
	})
}

func (inf *inference) inferenceTime() time.Duration {
	t := inf.res.Timing
	return t.Vision + t.Prefix + t.Expert
}

func identityField(f string) string { return f }

func nilIfZero(n int) any {
	if n == 0 {
		return nil
	}
	return n
}

// predictBody is the original pi0.5 package's POST /predict request.
type predictBody struct {
	RobotID      json.RawMessage   `json:"robot_id"`
	Images       []json.RawMessage `json:"images"`
	Prompt       string            `json:"prompt"`
	State        json.RawMessage   `json:"state"`
	Tokens       json.RawMessage   `json:"tokens"`
	Noise        json.RawMessage   `json:"noise"`
	NumSteps     int               `json:"num_steps"`
	Seed         *uint64           `json:"seed"`
	PromptBucket int               `json:"prompt_bucket"`
}

// predictResult is the original pi0.5 package's POST /predict response.
type predictResult struct {
	Actions         [][]float32        `json:"actions"`
	ActionHorizon   int                `json:"action_horizon"`
	ActionDim       int                `json:"action_dim"`
	Normalized      bool               `json:"normalized"`
	DenoisingSteps  int                `json:"denoising_steps"`
	Prompt          *string            `json:"prompt"`
	NumTokens       int                `json:"num_tokens"`
	TokenLen        int                `json:"token_len"`
	PromptTruncated bool               `json:"prompt_truncated"`
	ImagesUsed      int                `json:"images_used"`
	ImagesPadded    int                `json:"images_padded"`
	OriginalSizes   [][2]int           `json:"original_sizes"`
	ImageSize       int                `json:"image_size"`
	Seed            *uint64            `json:"seed"`
	BatchedAs       int                `json:"batched_as"`
	TimingMS        map[string]float64 `json:"timing_ms"`
}

// checkFrameCount refuses more camera frames than the policy has slots before any is decoded (a
// list of frames could otherwise hold many decoded pictures before Prepare counts them).
func checkFrameCount(p *pi05.Policy, n int) *server.APIError {
	if n > p.Server.NumImages {
		return server.BadRequest(fmt.Sprintf("got %d images, this server takes 1 to %d (PI05_NUM_IMAGES)", n, p.Server.NumImages))
	}
	return nil
}

// commonRequest fills the parts of a pi05.Request shared by both APIs; field names the keys.
func commonRequest(req *pi05.Request, state, tokens, noise json.RawMessage, field func(string) string) *server.APIError {
	var err error
	if req.State, err = floatList(state); err != nil {
		return server.BadRequest(field("state") + ": " + err.Error())
	}
	if len(tokens) > 0 && !server.IsNull(tokens) {
		if req.Tokens, err = intList(tokens); err != nil {
			return server.BadRequest(field("tokens") + ": " + err.Error())
		}
		if req.Tokens == nil {
			req.Tokens = []int{}
		}
	}
	if len(noise) > 0 && !server.IsNull(noise) {
		if req.Noise, req.NoiseRows, req.NoiseCols, err = floatMatrix(noise); err != nil {
			return server.BadRequest(field("noise") + ": " + err.Error())
		}
	}
	return nil
}

// predict answers POST /predict: 400 naming the field for a bad request, 500 when inference fails.
func (m *Model) predict(w http.ResponseWriter, r *http.Request, rec server.Recorder) {
	start := time.Now()
	if ct := r.Header.Get("Content-Type"); strings.Contains(ct, "msgpack") {
		server.WriteDetail(w, http.StatusUnsupportedMediaType, "Content-Type "+ct+": /predict takes JSON (msgpack goes to /v1/actions/generations)")
		return
	}
	mem := server.RequestMemory(r.Context())
	defer mem.Done()
	body, aerr := readPI05Body(w, r, mem)
	if aerr != nil {
		aerr.Write(w)
		return
	}
	body = quoteNonFinite(body)
	if aerr := m.refuseEarly(r, body); aerr != nil {
		aerr.Write(w)
		return
	}
	var b predictBody
	if aerr := decodeObject(body, &b); aerr != nil {
		aerr.Write(w)
		return
	}
	robot, aerr := robotID(b.RobotID, r)
	if aerr != nil {
		aerr.Write(w)
		return
	}
	req := &pi05.Request{Prompt: b.Prompt, NumSteps: b.NumSteps, Seed: b.Seed, PromptBucket: b.PromptBucket}
	if aerr := commonRequest(req, b.State, b.Tokens, b.Noise, identityField); aerr != nil {
		aerr.Write(w)
		return
	}
	p, _ := m.current()
	if aerr := checkFrameCount(p, len(b.Images)); aerr != nil {
		aerr.Detail = "images: " + aerr.Detail
		aerr.Write(w)
		return
	}
	for i, raw := range b.Images {
		img, err := imageValue(raw, mem)
		if aerr := server.MemoryAPIError(err); aerr != nil {
			aerr.Write(w)
			return
		}
		if err != nil {
			server.WriteDetail(w, http.StatusBadRequest, fmt.Sprintf("images[%d]: %v", i, err))
			return
		}
		req.Images = append(req.Images, img)
	}
	inf, aerr := m.infer(r.Context(), start, robot, req, identityField, mem, rec)
	if aerr != nil {
		aerr.Write(w)
		return
	}
	answerHeaders(w, inf)
	var prompt *string
	if req.Tokens == nil {
		prompt = &inf.prep.Prompt.Text
	}
	server.WriteJSON(w, http.StatusOK, predictResult{
		Actions: inf.res.Actions, ActionHorizon: len(inf.res.Actions), ActionDim: len(inf.res.Actions[0]),
		Normalized: inf.res.Normalized, DenoisingSteps: inf.prep.Steps, Prompt: prompt,
		NumTokens: len(inf.prep.Prompt.Tokens), TokenLen: inf.prep.Bucket, PromptTruncated: inf.prep.Prompt.Truncated,
		ImagesUsed: inf.prep.ImagesUsed, ImagesPadded: inf.prep.ImagesPadded, OriginalSizes: inf.prep.OriginalSizes,
		ImageSize: inf.imageSize, Seed: inf.prep.Seed, BatchedAs: inf.res.BatchedAs,
		TimingMS: map[string]float64{"preprocess": server.Millis(inf.preprocess), "inference": server.Millis(inf.inferenceTime()), "total": server.Millis(time.Since(start))},
	})
}

// generate answers POST /v1/actions/generations: JSON or msgpack in (Content-Type), JSON or msgpack
// out (wantsMsgpack); the envelope or the raw policy payload.
func (m *Model) generate(w http.ResponseWriter, r *http.Request, rec server.Recorder) {
	start := time.Now()
	mem := server.RequestMemory(r.Context())
	defer mem.Done()
	body, aerr := readPI05Body(w, r, mem)
	if aerr != nil {
		aerr.Write(w)
		return
	}
	var ar *actionRequest
	if strings.Contains(strings.ToLower(r.Header.Get("Content-Type")), "msgpack") {
		ar, aerr = m.decodeActionMsgpack(body, wantsMsgpack(r), mem)
	} else {
		body = quoteNonFinite(body)
		if aerr = m.refuseEarly(r, body); aerr == nil {
			ar, aerr = m.decodeActionJSON(body, wantsMsgpack(r), mem)
		}
	}
	if aerr != nil {
		aerr.Write(w)
		return
	}
	if ar.robot == "" {
		ar.robot = robotHeader(r)
	}
	inf, aerr := m.act(r.Context(), start, ar, rec)
	if aerr != nil {
		aerr.Write(w)
		return
	}
	answerHeaders(w, inf)
	out := m.envelope(ar, inf, start)
	if ar.responseFormat == "raw" {
		out = m.rawPayload(ar, inf, start)
	}
	if ar.msgpackOut {
		writeMsgpack(w, http.StatusOK, out)
		return
	}
	server.WriteJSON(w, http.StatusOK, out)
}

func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// metadata answers GET /v1/actions/metadata.
func (m *Model) metadata(w http.ResponseWriter, _ *http.Request, _ server.Recorder) {
	server.WriteJSON(w, http.StatusOK, m.actionMetadata())
}
