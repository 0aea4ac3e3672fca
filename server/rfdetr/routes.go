package rfdetr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/models/imagemem"
	"github.com/ttmodel/tt-model/models/rfdetr"
	"github.com/ttmodel/tt-model/server"
	"github.com/ttmodel/tt-model/server/api"
)

// Name is the display name of the RF-DETR model, as /health reports it.
const Name = "RF-DETR-base"

// Options configure the RF-DETR model behind the server.
type Options struct {
	Getenv func(string) string // os.Getenv in production: weights discovery
	Build  rfdetr.Builder      // compiles the network (the native forward)
	Device string              // what /health reports once ready, e.g. "cpu avx512bf16, fp32, 2 threads"
	// Warmup is the forwards run before ready (0 means 1). One is enough for "ready means warm":
	// the weights are paged in by then (packed, or mapped and CRC-checked), and the forward touches
	// every scratch buffer and wakes the thread pool; measured, the forward after it costs what
	// every later one does (docs/rfdetr.md).
	Warmup int
	// Version is the server binary's version, reported by /info.
	Version string
	// Env is said at start (Environment); its notices are on /info too.
	Env server.EnvReport
}

// Model serves the original RF-DETR package's API: POST /predict on one image.
type Model struct {
	opts Options
	log  *slog.Logger // set by Load

	mu     sync.Mutex // guards det, source and test, which Load sets while /info reads
	det    *rfdetr.Detector
	source rfdetr.Source
	test   string     // the notice of generated test weights (server.TestWeightsReporter)
	run    sync.Mutex // one forward at a time: the detector has one set of buffers
}

// New prepares the model; nothing is read until Load.
func New(opts Options) *Model {
	if opts.Warmup == 0 {
		opts.Warmup = 1
	}
	return &Model{opts: opts}
}

// Environment checks the PI05_* and TT_* variables of environ for an RF-DETR server: what
// its start says of them, or an error naming a bad value of one the supervisor reads.
func Environment(environ []string) (server.EnvReport, error) { return envRules().Check(environ) }

func (m *Model) Name() string { return Name }

// Load finds the weights, checks and compiles them, and runs the warm-up
// forwards.
func (m *Model) Load(ctx context.Context, log *slog.Logger) error {
	m.log = log
	m.opts.Env.Say(log)
	src, err := rfdetr.FindWeights(m.opts.Getenv)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.source = src
	m.mu.Unlock()
	if what, ok := hub.TestWeightsIn(src.Dir); ok {
		n := hub.TestWeightsNotice(m.repo(), what)
		log.Warn("RANDOM TEST WEIGHTS", "weights", n)
		m.mu.Lock()
		m.test = n
		m.mu.Unlock()
	}
	log.Info("loading weights", "dir", src.Dir, "via", src.Via, "repo", src.Repo, "revision", src.Revision)
	det, err := rfdetr.Load(ctx, src, m.opts.Build, log)
	if err != nil {
		return err
	}
	log.Info("warming up", "forwards", m.opts.Warmup)
	start := time.Now()
	if err := det.Warmup(ctx, m.opts.Warmup); err != nil {
		_ = det.Close()
		return err
	}
	log.Info("warm-up complete", "seconds", time.Since(start).Seconds())
	m.mu.Lock()
	m.det = det
	m.mu.Unlock()
	return nil
}

// TestWeights is the notice of generated test weights (TestWeightsReporter).
func (m *Model) TestWeights() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.test
}

func (m *Model) detector() *rfdetr.Detector {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.det
}

func (m *Model) Device() string {
	if m.detector() == nil {
		return ""
	}
	return m.opts.Device
}

// NativeBytes is the detector's memory outside the Go heap (NativeMemory).
func (m *Model) NativeBytes() int64 {
	if d := m.detector(); d != nil {
		return d.NativeBytes()
	}
	return 0
}

func (m *Model) Close() error {
	if d := m.detector(); d != nil {
		return d.Close()
	}
	return nil
}

func (m *Model) repo() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.source.Repo != "" {
		return m.source.Repo
	}
	if r := m.opts.Getenv("HF_MODEL"); r != "" && m.source.Via != "HF_MODEL" {
		return r
	}
	return rfdetr.DefaultRepo
}

func (m *Model) ModelCards() []server.ModelCard {
	return []server.ModelCard{{ID: m.repo(), Object: "model", OwnedBy: "tt-model"}}
}

func (m *Model) Info() map[string]any {
	m.mu.Lock()
	src, det := m.source, m.det
	m.mu.Unlock()
	status, device := "starting", any(nil)
	labels := rfdetr.Labels(nil)
	names := ""
	if det != nil {
		status, device, labels, names = "ok", m.opts.Device, det.Labels(), det.Scheme()
	}
	return map[string]any{
		"model":    Name,
		"task":     "object-detection",
		"status":   status,
		"hardware": "cpu",
		"device":   device,
		"weights": map[string]any{
			"repo": m.repo(), "revision": server.NilIfEmpty(src.Revision), "dir": server.NilIfEmpty(src.Dir), "via": server.NilIfEmpty(src.Via),
			"files": []string{rfdetr.WeightsFile, rfdetr.ConfigFile}, "tensor_names": server.NilIfEmpty(names),
		},
		"input": map[string]any{
			"size": []int{rfdetr.InputSize, rfdetr.InputSize}, "images_per_request": 1, "batch": 1,
			"formats": []string{"png", "jpeg"}, "max_side": rfdetr.MaxImageSide, "max_body_bytes": MaxBodyBytes,
			"max_decode_bytes": imagemem.MaxDecodeBytes,
		},
		"defaults":   map[string]any{"threshold": defaultThreshold, "max_detections": defaultMaxDetections},
		"outputs":    map[string]any{"queries": rfdetr.NumQueries, "classes": rfdetr.NumClasses},
		"labels":     labels,
		"server":     map[string]any{"name": "tt-model-server", "version": m.opts.Version},
		"serialized": true,
		"notices":    m.opts.Env.Notices,
	}
}

// Routes binds the RF-DETR routes of the route table (api.ModelRoutes) to their handlers.
func (m *Model) Routes() []server.Route {
	return server.BindRoutes(api.KindRFDETR, map[string]server.RouteHandler{"predict": m.predict})
}

type detectionJSON struct {
	Label   string     `json:"label"`
	LabelID int        `json:"label_id"`
	Score   float32    `json:"score"`
	Box     [4]float32 `json:"box"`
	BoxNorm [4]float32 `json:"box_cxcywh_norm"`
}

type timingJSON struct {
	Decode      float64 `json:"decode"`
	Preprocess  float64 `json:"preprocess"`
	Inference   float64 `json:"inference"`
	Postprocess float64 `json:"postprocess"`
	Total       float64 `json:"total"`
}

type rawJSON struct {
	Logits    [][]float32 `json:"logits"`
	PredBoxes [][]float32 `json:"pred_boxes"`
}

type predictResponse struct {
	Detections    []detectionJSON `json:"detections"`
	NumDetections int             `json:"num_detections"`
	ImageSize     struct {
		Width  int `json:"width"`
		Height int `json:"height"`
	} `json:"image_size"`
	InputSize [2]int     `json:"input_size"`
	Threshold float64    `json:"threshold"`
	TimingMS  timingJSON `json:"timing_ms"`
	Raw       *rawJSON   `json:"raw,omitempty"`
}

// predict answers POST /predict: a JSON body, a PNG or JPEG body, or multipart/form-data
// (forms.go). Status codes: 400 for a body or image that
// cannot be used (with the reason), 422 for schema violations, 503 (with
// Retry-After) when the request memory budget is full and 413 when the
// request would not fit in it at all, 500 "inference failed: <Type>:
// <text>" when the forward fails.
func (m *Model) predict(w http.ResponseWriter, r *http.Request, rec server.Recorder) {
	start := time.Now()
	mem := server.RequestMemory(r.Context())
	defer mem.Done()
	body, berr := server.ReadBody(w, r, MaxBodyBytes, fmt.Sprintf("%d bytes (32 MiB)", MaxBodyBytes), mem)
	if berr != nil {
		if berr.Status == http.StatusRequestEntityTooLarge && berr.Budget == nil {
			berr.Status = http.StatusBadRequest // the seed's contract: a larger body is a 400
		}
		berr.Write(w)
		return
	}
	req, ferrs, perr := rfdetrBody(r.Header.Get("Content-Type"), r.URL.Query(), body, mem)
	if perr != nil {
		perr.Write(w)
		return
	}
	if len(ferrs) > 0 {
		server.WriteFieldErrors(w, ferrs)
		return
	}

	t0 := time.Now()
	data := req.Picture
	if data == nil {
		var err error
		if data, err = decodeBase64Image(req.Image); err != nil {
			server.WriteDetail(w, http.StatusBadRequest, err.Error())
			return
		}
		req.Image = "" // let the collector free the base64 text while the forward runs
	}
	pic, err := rfdetr.DecodePicture(data, mem)
	if aerr := server.MemoryAPIError(err); aerr != nil {
		aerr.Write(w)
		return
	}
	if err != nil {
		server.WriteDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	decode := time.Since(t0)

	res, err := m.detect(r.Context(), pic, rfdetr.Options{Threshold: float32(req.Threshold), MaxDetections: req.MaxDetections})
	if r.Context().Err() != nil {
		return // the client left while it waited: nobody reads an answer
	}
	if err != nil {
		var bad *rfdetr.BadImageError
		if errors.As(err, &bad) { // a streamed PNG's pixel data was corrupt
			server.WriteDetail(w, http.StatusBadRequest, err.Error())
			return
		}
		var p *server.PanicError
		if errors.As(err, &p) {
			m.log.Error("forward panicked", "panic", p.Error(), "stack", p.Stack)
		}
		server.WriteDetail(w, http.StatusInternalServerError, inferenceFailure(err))
		return
	}
	resp := predictResponse{
		Detections: make([]detectionJSON, 0, len(res.Detections)),
		InputSize:  [2]int{rfdetr.InputSize, rfdetr.InputSize},
		Threshold:  req.Threshold,
	}
	for _, d := range res.Detections {
		if !server.Finite(d.BoxNorm[:]) {
			server.WriteDetail(w, http.StatusInternalServerError, fmt.Sprintf("inference failed: NonFiniteOutput: query %d box %v", d.Query, d.BoxNorm))
			return
		}
		resp.Detections = append(resp.Detections, detectionJSON{Label: d.Label, LabelID: d.LabelID, Score: d.Score, Box: d.Box, BoxNorm: d.BoxNorm})
	}
	resp.NumDetections = len(resp.Detections)
	resp.ImageSize.Width, resp.ImageSize.Height = pic.Width, pic.Height
	if req.ReturnRaw {
		if !server.Finite(res.Logits) || !server.Finite(res.Boxes) {
			server.WriteDetail(w, http.StatusInternalServerError, "inference failed: NonFiniteOutput: raw logits or boxes contain NaN or Inf")
			return
		}
		resp.Raw = &rawJSON{Logits: rows(res.Logits, rfdetr.NumClasses), PredBoxes: rows(res.Boxes, 4)}
	}
	rec.Stage("decode", decode)
	rec.Stage("preprocess", res.Timing.Preprocess)
	rec.Stage("inference", res.Timing.Inference)
	rec.Stage("postprocess", res.Timing.Postprocess)
	resp.TimingMS = timingJSON{
		Decode: server.Millis(decode), Preprocess: server.Millis(res.Timing.Preprocess), Inference: server.Millis(res.Timing.Inference),
		Postprocess: server.Millis(res.Timing.Postprocess), Total: server.Millis(time.Since(start)),
	}
	server.WriteJSON(w, http.StatusOK, resp)
}

// detect runs the detector, one request at a time (it has one set of
// buffers), turning a panic in the forward into an error so the request is
// answered as an inference failure. It is called with a checked picture
// only: a slow client never holds the detector.
func (m *Model) detect(ctx context.Context, pic *rfdetr.Picture, opt rfdetr.Options) (res rfdetr.Result, err error) {
	m.run.Lock()
	defer m.run.Unlock()
	if err := ctx.Err(); err != nil {
		return rfdetr.Result{}, err
	}
	defer func() {
		if p := recover(); p != nil {
			err = &rfdetr.InferenceError{Err: &server.PanicError{Value: p, Stack: string(debug.Stack())}}
		}
	}()
	return m.detector().Detect(ctx, pic, opt)
}

// inferenceFailure formats the original server's 500 detail: "inference failed:
// <Type>: <text>", the type being the innermost error's.
func inferenceFailure(err error) string {
	var inf *rfdetr.InferenceError
	if errors.As(err, &inf) {
		err = inf.Err
	}
	return fmt.Sprintf("inference failed: %s: %v", server.ErrorKind(err), err)
}

// rows views a flat row-major matrix as rows (no copy).
func rows(flat []float32, width int) [][]float32 {
	out := make([][]float32, len(flat)/width)
	for i := range out {
		out[i] = flat[i*width : (i+1)*width : (i+1)*width]
	}
	return out
}
