package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ttmodel/tt-model/server/api"
	"github.com/ttmodel/tt-model/server/console"
)

// ExitFault is the exit code of a device hang: the supervisor resets the
// chip and restarts the server when it sees it.
const ExitFault = 75

// Options configure a Server.
type Options struct {
	Log *slog.Logger
	// Fault is the test-only fault switch (TT_MODEL_FAULT); its exit kind is
	// the server's own: Run returns an *ExitError after that many predictions.
	Fault Fault
	// ShutdownGrace bounds how long in-flight requests may finish after a
	// stop signal (default 30 s).
	ShutdownGrace time.Duration
	// Body bounds how request bodies are read (defaults: DefaultBodyLimits).
	Body BodyLimits
	// RequestMemory is the memory budget, in bytes, of the requests received and not yet
	// answered: their bodies and decoded images (membudget.go). 0: no budget.
	RequestMemory int64
	// APIKey, when set, is required on every route but the Open ones
	// (requireKey); "" serves every route to anyone who reaches the port.
	APIKey string
	// Loaded is called once the model is loaded with the bytes its native program holds outside
	// the Go heap (NativeMemory; 0 when the model does not say): the Go memory limit leaves them
	// room.
	Loaded func(nativeBytes int64)
}

// ExitError is returned by Run when the process must exit with Code: a
// device hang (the model's watchdog) or the fault switch.
type ExitError struct {
	Code   int
	Reason string
}

func (e *ExitError) Error() string { return fmt.Sprintf("%s (exit %d)", e.Reason, e.Code) }

// Server serves one Model.
type Server struct {
	model   Model
	opts    Options
	log     *slog.Logger
	metrics *metrics
	handler http.Handler

	table   []api.Route // what routes() registered, in order
	console *console.Renderer
	memory  *memBudget

	started     time.Time
	readySince  atomic.Int64 // unix nanoseconds the model became ready at; 0 before
	ready       atomic.Bool
	predictions atomic.Int64
	fault       chan struct{}
	faultOnce   sync.Once
}

// New builds a server for m; nothing is loaded until Run.
func New(m Model, opts Options) *Server {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.ShutdownGrace == 0 {
		opts.ShutdownGrace = 30 * time.Second
	}
	if opts.Body == (BodyLimits{}) {
		opts.Body = DefaultBodyLimits
	}
	pages, err := console.NewRenderer()
	if err != nil {
		panic(err) // the templates are embedded: a parse error is a bug every test meets
	}
	s := &Server{model: m, opts: opts, log: opts.Log, metrics: newMetrics(m.Name()), fault: make(chan struct{}),
		console: pages, started: time.Now(), memory: &memBudget{limit: opts.RequestMemory}}
	s.metrics.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tt_model_request_memory_bytes", ConstLabels: prometheus.Labels{"model": m.Name()},
			Help: "Bytes of the request memory budget held by requests received and not yet answered (bodies, decoded images)."},
			func() float64 { return float64(s.memory.inUse()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tt_model_request_memory_limit_bytes", ConstLabels: prometheus.Labels{"model": m.Name()},
			Help: "The request memory budget (" + RequestMemoryEnv + "); 0: none."},
			func() float64 { return float64(s.memory.limit) }))
	if src, ok := m.(MetricsSource); ok {
		s.metrics.registry.MustRegister(src.Collectors()...)
	}
	s.handler = s.routes()
	return s
}

// Handler is the server's HTTP handler (for tests and embedding).
func (s *Server) Handler() http.Handler { return s.handler }

// Ready reports whether the model is loaded.
func (s *Server) Ready() bool { return s.ready.Load() }

// MarkLoaded makes the model's routes answer without Run loading it: for a model its caller
// loaded, served through Handler alone (tests).
func (s *Server) MarkLoaded() { s.ready.Store(true) }

// Routes are the routes this server answers, in the order it registered
// them: api.Common, then the model's. GET /info lists them.
func (s *Server) Routes() []api.Route { return append([]api.Route(nil), s.table...) }

// routes builds the dispatch table from the common routes (api.Common, bound
// here by name) and the model's. Dispatch is by exact path, then by the
// longest Prefix route, then method, so unknown paths and wrong methods get
// JSON 404/405. A route declared twice, or a common route without a handler
// here, panics: the route table and the server would disagree.
func (s *Server) routes() http.Handler {
	metricsHandler := promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{})
	common, err := bind(api.Common(), map[string]RouteHandler{
		"health": s.health, "info": s.info, "models": s.models,
		"metrics":        func(w http.ResponseWriter, r *http.Request, _ Recorder) { metricsHandler.ServeHTTP(w, r) },
		"console":        s.consolePage,
		"console_status": s.consoleStatus,
		"console_stats":  s.consoleStats,
		"console_assets": s.consoleAsset,
	})
	if err != nil {
		panic("server: common routes: " + err.Error())
	}
	table := map[string]map[string]*endpoint{} // path -> method -> handlers
	var folders []string                       // Prefix routes' paths, longest first
	add := func(r Route, h http.HandlerFunc) {
		if table[r.Path] == nil {
			table[r.Path] = map[string]*endpoint{}
			if r.Prefix {
				folders = append(folders, r.Path)
				sort.Slice(folders, func(i, j int) bool { return len(folders[i]) > len(folders[j]) })
			}
		}
		e := table[r.Path][r.Method]
		if e == nil {
			e = &endpoint{}
			table[r.Path][r.Method] = e
		}
		slot := &e.plain
		if r.Stream {
			slot = &e.stream
		}
		if *slot != nil {
			panic(fmt.Sprintf("server: route %s %s declared twice", r.Method, r.Path))
		}
		if s.opts.APIKey != "" && !r.Open {
			h = requireKey(s.opts.APIKey, h)
		}
		*slot = s.instrument(r.Name, h)
		s.table = append(s.table, r.Route)
	}
	for _, r := range common {
		add(r, func(w http.ResponseWriter, req *http.Request) { r.Handler(w, req, stageRecorder{s.metrics}) })
	}
	for _, r := range s.model.Routes() {
		h := s.modelRoute(r)
		if !r.Stream {
			h = s.timed(h)
		}
		add(r, h)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		methods := table[r.URL.Path]
		for i := 0; methods == nil && i < len(folders); i++ {
			if strings.HasPrefix(r.URL.Path, folders[i]) {
				methods = table[folders[i]]
			}
		}
		if methods == nil {
			WriteDetail(w, http.StatusNotFound, "Not Found")
			return
		}
		e := methods[r.Method]
		if e == nil && r.Method == http.MethodHead {
			e = methods[http.MethodGet]
		}
		if e == nil {
			allowed := make([]string, 0, len(methods))
			for m := range methods {
				allowed = append(allowed, m)
			}
			sort.Strings(allowed)
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			WriteDetail(w, http.StatusMethodNotAllowed, "Method Not Allowed")
			return
		}
		e.serve(w, r)
	})
}

// endpoint is what one method of one path answers: a plain handler, a
// websocket (Stream) handler, or both (pi0.5's /: the console for a
// browser, OpenPI's policy for a websocket client).
type endpoint struct{ plain, stream http.HandlerFunc }

func (e *endpoint) serve(w http.ResponseWriter, r *http.Request) {
	if e.stream != nil && (e.plain == nil || isWebsocket(r)) {
		e.stream(w, r)
		return
	}
	e.plain(w, r)
}

// isWebsocket reports whether r asks to become a websocket (RFC 6455 4.1:
// Connection lists "upgrade" and Upgrade lists "websocket").
func isWebsocket(r *http.Request) bool {
	return headerHas(r.Header, "Connection", "upgrade") && headerHas(r.Header, "Upgrade", "websocket")
}

func headerHas(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// statusWriter remembers the status code for metrics and recovery.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController (read deadlines) and websocket upgrades reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// StatusClientClosed labels requests whose client went away before its
// answer (nginx's 499): their own outcome on /metrics, never a 500.
const StatusClientClosed = 499

// instrument adds metrics, an access log line and panic recovery: a panic
// in one request is logged with its stack and answered 500; the server
// keeps serving.
func (s *Server) instrument(name string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("request panicked", "route", name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if sw.status == 0 {
					WriteDetail(sw, http.StatusInternalServerError, fmt.Sprintf("internal error: %v", p))
				}
			}
			d := time.Since(start)
			status := sw.status
			if r.Context().Err() != nil {
				status = StatusClientClosed
				s.metrics.disconnects.WithLabelValues(name).Inc()
			}
			s.metrics.requests.WithLabelValues(name, strconv.Itoa(status)).Inc()
			s.metrics.latency.WithLabelValues(name).Observe(d.Seconds())
			if name != "health" && name != "metrics" {
				s.log.Info("request", "method", r.Method, "path", r.URL.Path, "status", status, "ms", float64(d.Microseconds())/1000)
			}
		}()
		h(sw, r)
	}
}

// modelRoute gates a model handler: 503 until loaded; answered predictions
// feed the exit fault switch. The server does not serialise requests: a
// model takes its device only once a request's body is read and checked
// (RF-DETR one at a time, pi0.5 through its scheduler), so a slow client
// never holds it.
func (s *Server) modelRoute(rt Route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.ready.Load() {
			w.Header().Set("Retry-After", "5")
			WriteDetail(w, http.StatusServiceUnavailable, s.model.Name()+" is starting: weights are loading and warming up")
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		ctx := context.WithValue(r.Context(), bodyLimitsKey{}, s.opts.Body)
		r = r.WithContext(context.WithValue(ctx, memBudgetKey{}, s.memory))
		if rt.Stream { // a websocket counts each request it answers (PredictionCounter)
			rt.Handler(sw, r, streamRecorder{stageRecorder{s.metrics}, s, rt.Counts})
			return
		}
		rt.Handler(sw, r, stageRecorder{s.metrics})
		if rt.Counts && sw.status == http.StatusOK {
			s.predicted()
		}
	}
}

// predicted counts an answered prediction; the exit fault switch fires at its count.
func (s *Server) predicted() {
	n := s.predictions.Add(1)
	if s.opts.Fault.Kind == "exit" && n >= int64(s.opts.Fault.After) {
		s.faultOnce.Do(func() { close(s.fault) })
	}
}

// streamRecorder is a Stream route's PredictionCounter.
type streamRecorder struct {
	stageRecorder
	s      *Server
	counts bool
}

func (r streamRecorder) Predicted() {
	if r.counts {
		r.s.predicted()
	}
}

// health is "starting" until loaded, then the model's health: "ok", or for
// a model with a watchdog "degraded" (serving on fewer devices) or "hung"
// (503: about to exit for a chip reset).
func (s *Server) health(w http.ResponseWriter, _ *http.Request, _ Recorder) {
	status, device, detail := s.state()
	code := http.StatusOK
	if status == "hung" {
		code = http.StatusServiceUnavailable
	}
	body := map[string]any{"model": s.model.Name()}
	for k, v := range detail {
		body[k] = v
	}
	body["status"], body["device"] = status, device
	if n := s.testWeights(); n != "" {
		body["weights"] = n
	}
	WriteJSON(w, code, body)
}

// testWeights is the model's notice of generated test weights, "" when it has none.
func (s *Server) testWeights() string {
	if r, ok := s.model.(TestWeightsReporter); ok {
		return r.TestWeights()
	}
	return ""
}

// state is what /health and the console report: "starting" until the model
// is loaded (no device yet), then "ok" and the device, or for a model with a
// watchdog its health ("degraded": serving on fewer devices; "hung": about
// to exit for a chip reset) and its details.
func (s *Server) state() (status string, device any, detail map[string]any) {
	if !s.ready.Load() {
		return "starting", nil, nil
	}
	status, device = "ok", s.model.Device()
	if h, ok := s.model.(HealthReporter); ok {
		status, detail = h.Health(), h.HealthDetail()
	}
	return status, device, detail
}

// info is the model's Info with "routes": every route this server answers.
func (s *Server) info(w http.ResponseWriter, _ *http.Request, _ Recorder) {
	info := s.model.Info()
	routes := make([]map[string]string, 0, len(s.table))
	for _, r := range s.table {
		routes = append(routes, map[string]string{"method": r.Method, "path": r.Path, "what": r.What})
	}
	info["routes"] = routes
	if n := s.testWeights(); n != "" {
		if w, ok := info["weights"].(map[string]any); ok {
			w["notice"], w["test_weights"] = n, true
		}
	}
	WriteJSON(w, http.StatusOK, info)
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request, _ Recorder) {
	WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": s.model.ModelCards()})
}

// Run serves on ln, loads the model in the background, and returns when ctx
// is cancelled (graceful shutdown: nil), when loading fails (its error), or
// with an *ExitError when the process must exit with a code: a device hang
// (after the model's drain, with the model's hang code; also on a stop
// signal after a hang) or the exit fault switch (after the last response is
// out). After a hang the model is not closed: a stuck device call never
// returns.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute, // a 64 MB body at the minimum rate; bodies are also bounded by Options.Body
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	s.log.Info("listening", "addr", ln.Addr().String(), "model", s.model.Name())

	loadErr := make(chan error, 1)
	go func() {
		start := time.Now()
		err := s.model.Load(ctx, s.log)
		if err == nil {
			s.metrics.loadSecs.Set(time.Since(start).Seconds())
			s.metrics.ready.Set(1)
			s.readySince.Store(time.Now().UnixNano())
			if s.opts.Loaded != nil {
				var native int64
				if nm, ok := s.model.(NativeMemory); ok {
					native = nm.NativeBytes()
				}
				s.opts.Loaded(native)
			}
			s.ready.Store(true)
			s.log.Info("ready", "model", s.model.Name(), "device", s.model.Device(), "seconds", time.Since(start).Seconds())
		}
		loadErr <- err
	}()
	var hangExit <-chan int
	hw, watched := s.model.(HangWatcher)
	if watched {
		hangExit = hw.Exit()
	}

	var result error
	loading := loadErr
wait:
	for {
		select {
		case err := <-loading:
			loading = nil
			if err != nil {
				result = fmt.Errorf("load %s: %w", s.model.Name(), err)
				break wait
			}
		case err := <-serveErr:
			result = fmt.Errorf("serve: %w", err)
			break wait
		case <-s.fault:
			result = &ExitError{Code: ExitFault, Reason: fmt.Sprintf("fault switch: simulated device hang after %d predictions", s.predictions.Load())}
			break wait
		case code := <-hangExit:
			result = &ExitError{Code: code, Reason: "device hang: exiting for a chip reset and restart"}
			break wait
		case <-ctx.Done():
			s.log.Info("stop signal: shutting down", "grace", s.opts.ShutdownGrace)
			if watched && hw.Hung() {
				result = &ExitError{Code: hw.HangExitCode(), Reason: "stop signal after a device hang: exiting with the hang code, the stuck device left as it is"}
			}
			break wait
		}
	}
	hung := watched && hw.Hung()
	grace := s.opts.ShutdownGrace
	if hung {
		grace = min(grace, 5*time.Second) // the model has drained; only answers still being written remain
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := hs.Shutdown(shutCtx)
	switch {
	case hung:
		s.log.Warn("a device hung: the model is not closed (its stuck call never returns)")
	case err != nil && !errors.Is(err, http.ErrServerClosed):
		// A request may still be inside the program: freeing it now could
		// crash that request, and the process is exiting anyway.
		s.log.Warn("shutdown: requests still running; model not closed", "err", err)
	case s.ready.Load():
		if err := s.model.Close(); err != nil {
			s.log.Warn("close model", "err", err)
		}
	}
	return result
}
