package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/ttmodel/tt-model/models/pi05"
	"github.com/ttmodel/tt-model/server/api"
)

// PI05MaxBodyBytes bounds a pi0.5 request: four 640x480 frames as JSON arrays are about 15 MB.
const PI05MaxBodyBytes = 64 << 20

// PI05Options configure the pi0.5 model behind the server.
type PI05Options struct {
	Getenv func(string) string // os.Getenv in production: PI05_*, HF_MODEL, HF cache
	// Build packs the weights (pi05native.Builder: the C megakernels).
	Build pi05.Builder
	// Precision names the kernels' arithmetic Build uses (PI05_PRECISION), for /info.
	Precision string
	Version   string // the server binary's version, reported by /info
}

// PI05 serves the original pi0.5 package's API (POST /predict) and SGLang's action API
// (POST /v1/actions/generations, GET /v1/actions/metadata) with JSON bodies.
type PI05 struct {
	opts PI05Options
	srv  pi05.ServerConfig
	log  *slog.Logger

	mu     sync.Mutex // guards policy, device and dir, which Load sets while /info reads
	policy *pi05.Policy
	device *pi05.Device
	dir    string

	ws *wsHub // the open websockets
}

// NewPI05 reads the PI05_* environment (every bad value named); nothing is loaded until Load.
func NewPI05(opts PI05Options) (*PI05, error) {
	srv, err := pi05.ServerConfigFromEnv(opts.Getenv)
	if err != nil {
		return nil, err
	}
	return &PI05{opts: opts, srv: srv, log: slog.Default(), ws: newWSHub()}, nil
}

// Name is the served repository, as the original package's /health reports it.
func (m *PI05) Name() string { return m.srv.HFModel }

// Load finds the weights (PI05_WEIGHTS_DIR or the HF cache), checks and packs them, and runs one
// warm-up request.
func (m *PI05) Load(ctx context.Context, log *slog.Logger) error {
	m.log = log
	dir, err := m.srv.ResolveWeightsDir(m.opts.Getenv)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.dir = dir
	m.mu.Unlock()
	log.Info("loading pi05", "dir", dir, "precision", m.opts.Precision, "cameras", m.srv.NumImages,
		"horizon", m.srv.ActionHorizon, "steps", m.srv.NumSteps)
	p, err := pi05.LoadPolicy(ctx, m.srv, dir, m.opts.Build, log)
	if err != nil {
		return err
	}
	d, err := p.NewDevice(0, 1)
	if err != nil {
		p.Close()
		return err
	}
	start := time.Now()
	if err := warmup(ctx, p, d); err != nil {
		d.Close()
		p.Close()
		return fmt.Errorf("warm-up: %w", err)
	}
	log.Info("warm-up complete", "seconds", time.Since(start).Seconds())
	m.mu.Lock()
	m.policy, m.device = p, d
	m.mu.Unlock()
	return nil
}

// warmup runs one full request (all cameras, a short prompt, seeded noise).
func warmup(ctx context.Context, p *pi05.Policy, d *pi05.Device) error {
	side := p.Dims.Image
	frame := pi05.RGB{H: side, W: side, Pix: make([]uint8, 3*side*side)}
	imgs := make([]pi05.RGB, p.Server.NumImages)
	for i := range imgs {
		imgs[i] = frame
	}
	seed := uint64(0)
	in, err := p.Prepare(&pi05.Request{Images: imgs, Prompt: "warm up", Seed: &seed})
	if err != nil {
		return err
	}
	_, err = d.Run(ctx, in)
	return err
}

func (m *PI05) current() (*pi05.Policy, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.policy, m.dir
}

// Device describes where inference runs; "" until loaded.
func (m *PI05) Device() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.policy == nil {
		return ""
	}
	k := m.policy.Kernels()
	return fmt.Sprintf("cpu (%s, %s, %d threads)", k.ISA, k.Precision, m.device.Threads())
}

// Close ends the websockets (each after its request in progress), then releases the device and the
// policy.
func (m *PI05) Close() error {
	m.ws.shutdown()
	if !m.ws.wait(time.Minute) {
		m.log.Warn("websockets still busy after a minute: the device is left to the process exit")
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.policy != nil {
		m.device.Close()
		m.policy.Close()
	}
	return nil
}

func (m *PI05) owner() string {
	if org, _, ok := strings.Cut(m.srv.HFModel, "/"); ok {
		return org
	}
	return "tt-model"
}

// ModelCards is the one served repository.
func (m *PI05) ModelCards() []ModelCard {
	return []ModelCard{{ID: m.srv.HFModel, Object: "model", OwnedBy: m.owner()}}
}

// Info is the body of GET /info.
func (m *PI05) Info() map[string]any {
	p, dir := m.current()
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
			"HF_MODEL": m.srv.HFModel, "TT_WEIGHTS_REVISION": nilIfEmpty(m.srv.Revision), "PI05_WEIGHTS_DIR": nilIfEmpty(m.srv.WeightsDir),
		},
		"presets":  presets,
		"weights":  map[string]any{"dir": nilIfEmpty(dir), "revision": nilIfEmpty(m.srv.Revision)},
		"hardware": "cpu",
		"server":   map[string]any{"name": "tt-model-server", "version": m.opts.Version},
	}
	if p != nil {
		d := p.Dims
		info["status"] = "ok"
		info["device"] = m.Device()
		info["dims"] = d
		info["cameras"] = p.Config.Cameras()
		info["action_dim"] = p.Config.ActionDim()
		info["token_len"] = p.Server.TokenLen
		info["normalization"] = map[string]any{"normalized_actions": p.Norm.Action == nil, "files": p.Norm.Files}
		info["tokenizer"] = map[string]any{"path": m.srv.TokenizerPath(dir), "pieces": p.Tokenizer.Size(), "bos": p.Tokenizer.BOS()}
		info["megakernel"] = map[string]any{
			"backend": "cpu", "preset": p.Preset, "stages": []string{"vision", "prefix", "expert"},
			"note": "one process, one program: requests are served one at a time; sp_placement and slo are multi-chip features of the tt-metal package and do not apply to the CPU build",
		}
	}
	return info
}

// Routes binds the pi0.5 routes of the route table (api.ModelRoutes) to their handlers.
func (m *PI05) Routes() []Route {
	return bindRoutes(api.KindPI05, map[string]RouteHandler{
		"predict": m.predict, "actions_generations": m.generate, "actions_metadata": m.metadata,
		"actions_realtime": m.realtime, "openpi_policy": m.openpi, "openpi_policy_root": m.openpi,
		"openpi_healthz": m.healthz,
	})
}

// apiError is an HTTP error with its status.
type apiError struct {
	status int
	detail string
}

// readPI05Body reads a request body within the limit.
func readPI05Body(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, PI05MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &apiError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds the %d-byte limit", PI05MaxBodyBytes)}
		}
		return nil, &apiError{http.StatusBadRequest, "cannot read request body: " + err.Error()}
	}
	return body, nil
}

// decodeObject decodes a JSON object body, rejecting trailing data.
func decodeObject(body []byte, v any) *apiError {
	if err := json.Unmarshal(body, v); err != nil {
		return &apiError{http.StatusBadRequest, "invalid JSON body: " + err.Error()}
	}
	return nil
}

// inference is one answered request.
type inference struct {
	prep       *pi05.Prepared
	res        *pi05.Result
	preprocess time.Duration
	imageSize  int // the side frames were resized to (224 for pi05_base)
}

// infer validates, pre-processes and runs req. fieldName maps the canonical field names of
// pi05.RequestError to the API's own keys.
func (m *PI05) infer(ctx context.Context, start time.Time, req *pi05.Request, fieldName func(string) string, rec Recorder) (*inference, *apiError) {
	p, _ := m.current()
	prep, err := p.Prepare(req)
	if err != nil {
		var re *pi05.RequestError
		if errors.As(err, &re) {
			return nil, &apiError{http.StatusBadRequest, fieldName(re.Field) + ": " + re.Msg}
		}
		return nil, &apiError{http.StatusBadRequest, err.Error()}
	}
	pre := time.Since(start)
	m.mu.Lock()
	d := m.device
	m.mu.Unlock()
	res, err := runGuarded(ctx, d, prep)
	if err != nil {
		var pe *PanicError
		if errors.As(err, &pe) {
			m.log.Error("pi05 inference panicked", "panic", pe.Error(), "stack", pe.Stack)
		}
		return nil, &apiError{http.StatusInternalServerError, fmt.Sprintf("inference failed: %s: %v", errorKind(err), err)}
	}
	for r, row := range res.Actions {
		if !finite(row) {
			return nil, &apiError{http.StatusInternalServerError, fmt.Sprintf("inference failed: NonFiniteOutput: action row %d contains NaN or Inf", r)}
		}
	}
	rec.Stage("preprocess", pre)
	rec.Stage("vision", res.Timing.Vision)
	rec.Stage("prefix", res.Timing.Prefix)
	rec.Stage("expert", res.Timing.Expert)
	return &inference{prep: prep, res: res, preprocess: pre, imageSize: p.Dims.Image}, nil
}

// runGuarded turns a panic inside inference into an error so the request gets a 500.
func runGuarded(ctx context.Context, d *pi05.Device, in *pi05.Prepared) (res *pi05.Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: string(debug.Stack())}
		}
	}()
	return d.Run(ctx, in)
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

// commonRequest fills the parts of a pi05.Request shared by both APIs; field names the keys.
func commonRequest(req *pi05.Request, state, tokens, noise json.RawMessage, field func(string) string) *apiError {
	var err error
	if req.State, err = floatList(state); err != nil {
		return &apiError{http.StatusBadRequest, field("state") + ": " + err.Error()}
	}
	if len(tokens) > 0 && !isNull(tokens) {
		if req.Tokens, err = intList(tokens); err != nil {
			return &apiError{http.StatusBadRequest, field("tokens") + ": " + err.Error()}
		}
		if req.Tokens == nil {
			req.Tokens = []int{}
		}
	}
	if len(noise) > 0 && !isNull(noise) {
		if req.Noise, req.NoiseRows, req.NoiseCols, err = floatMatrix(noise); err != nil {
			return &apiError{http.StatusBadRequest, field("noise") + ": " + err.Error()}
		}
	}
	return nil
}

// predict answers POST /predict: 400 naming the field for a bad request, 500 when inference fails.
func (m *PI05) predict(w http.ResponseWriter, r *http.Request, rec Recorder) {
	start := time.Now()
	if ct := r.Header.Get("Content-Type"); strings.Contains(ct, "msgpack") {
		writeDetail(w, http.StatusUnsupportedMediaType, "Content-Type "+ct+": /predict takes JSON (msgpack goes to /v1/actions/generations)")
		return
	}
	body, aerr := readPI05Body(w, r)
	if aerr != nil {
		writeDetail(w, aerr.status, aerr.detail)
		return
	}
	var b predictBody
	if aerr := decodeObject(quoteNonFinite(body), &b); aerr != nil {
		writeDetail(w, aerr.status, aerr.detail)
		return
	}
	req := &pi05.Request{Prompt: b.Prompt, NumSteps: b.NumSteps, Seed: b.Seed, PromptBucket: b.PromptBucket}
	if aerr := commonRequest(req, b.State, b.Tokens, b.Noise, identityField); aerr != nil {
		writeDetail(w, aerr.status, aerr.detail)
		return
	}
	for i, raw := range b.Images {
		img, err := imageValue(raw)
		if err != nil {
			writeDetail(w, http.StatusBadRequest, fmt.Sprintf("images[%d]: %v", i, err))
			return
		}
		req.Images = append(req.Images, img)
	}
	inf, aerr := m.infer(r.Context(), start, req, identityField, rec)
	if aerr != nil {
		writeDetail(w, aerr.status, aerr.detail)
		return
	}
	var prompt *string
	if req.Tokens == nil {
		prompt = &inf.prep.Prompt.Text
	}
	writeJSON(w, http.StatusOK, predictResult{
		Actions: inf.res.Actions, ActionHorizon: len(inf.res.Actions), ActionDim: len(inf.res.Actions[0]),
		Normalized: inf.res.Normalized, DenoisingSteps: inf.prep.Steps, Prompt: prompt,
		NumTokens: len(inf.prep.Prompt.Tokens), TokenLen: inf.prep.Bucket, PromptTruncated: inf.prep.Prompt.Truncated,
		ImagesUsed: inf.prep.ImagesUsed, ImagesPadded: inf.prep.ImagesPadded, OriginalSizes: inf.prep.OriginalSizes,
		ImageSize: inf.imageSize, Seed: inf.prep.Seed, BatchedAs: 1,
		TimingMS: map[string]float64{"preprocess": ms(inf.preprocess), "inference": ms(inf.inferenceTime()), "total": ms(time.Since(start))},
	})
}

// generate answers POST /v1/actions/generations: JSON or msgpack in (Content-Type), JSON or msgpack
// out (wantsMsgpack); the envelope or the raw policy payload.
func (m *PI05) generate(w http.ResponseWriter, r *http.Request, rec Recorder) {
	start := time.Now()
	body, aerr := readPI05Body(w, r)
	if aerr != nil {
		writeDetail(w, aerr.status, aerr.detail)
		return
	}
	var ar *actionRequest
	if strings.Contains(strings.ToLower(r.Header.Get("Content-Type")), "msgpack") {
		ar, aerr = m.decodeActionMsgpack(body, wantsMsgpack(r))
	} else {
		ar, aerr = m.decodeActionJSON(quoteNonFinite(body), wantsMsgpack(r))
	}
	if aerr != nil {
		writeDetail(w, aerr.status, aerr.detail)
		return
	}
	inf, aerr := m.act(r.Context(), start, ar, rec)
	if aerr != nil {
		writeDetail(w, aerr.status, aerr.detail)
		return
	}
	out := m.envelope(ar, inf, start)
	if ar.responseFormat == "raw" {
		out = m.rawPayload(ar, inf, start)
	}
	if ar.msgpackOut {
		writeMsgpack(w, http.StatusOK, out)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// metadata answers GET /v1/actions/metadata.
func (m *PI05) metadata(w http.ResponseWriter, _ *http.Request, _ Recorder) {
	writeJSON(w, http.StatusOK, m.actionMetadata())
}
