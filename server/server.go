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
	// FaultExitAfter, when > 0, makes Run return a *FaultExit after that
	// many predictions have been answered: a test-only switch that simulates
	// a device hang for the supervisor's reset-and-restart path
	// (TT_MODEL_FAULT_EXIT_AFTER in tt-model-server).
	FaultExitAfter int
	// ShutdownGrace bounds how long in-flight requests may finish after a
	// stop signal (default 30 s).
	ShutdownGrace time.Duration
}

// FaultExit is returned by Run when the fault switch fires.
type FaultExit struct{ Predictions int }

func (e *FaultExit) Error() string {
	return fmt.Sprintf("fault switch: simulated device hang after %d predictions (exit %d)", e.Predictions, ExitFault)
}

// Server serves one Model.
type Server struct {
	model   Model
	opts    Options
	log     *slog.Logger
	metrics *metrics
	handler http.Handler

	table   []api.Route // what routes() registered, in order
	console *console.Renderer

	started     time.Time
	readySince  atomic.Int64 // unix nanoseconds the model became ready at; 0 before
	ready       atomic.Bool
	exclusive   sync.Mutex // one model request at a time (the program has one set of buffers)
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
	pages, err := console.NewRenderer()
	if err != nil {
		panic(err) // the templates are embedded: a parse error is a bug every test meets
	}
	s := &Server{model: m, opts: opts, log: opts.Log, metrics: newMetrics(m.Name()), fault: make(chan struct{}),
		console: pages, started: time.Now()}
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
			writeDetail(w, http.StatusNotFound, "Not Found")
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
			writeDetail(w, http.StatusMethodNotAllowed, "Method Not Allowed")
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

// Unwrap lets http.ResponseController and websocket upgrades reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

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
					writeDetail(sw, http.StatusInternalServerError, fmt.Sprintf("internal error: %v", p))
				}
			}
			d := time.Since(start)
			s.metrics.requests.WithLabelValues(name, strconv.Itoa(sw.status)).Inc()
			s.metrics.latency.WithLabelValues(name).Observe(d.Seconds())
			if name != "health" && name != "metrics" {
				s.log.Info("request", "method", r.Method, "path", r.URL.Path, "status", sw.status, "ms", float64(d.Microseconds())/1000)
			}
		}()
		h(sw, r)
	}
}

// modelRoute gates a model handler: 503 until loaded, then one request at a
// time; counted requests feed the fault switch.
func (s *Server) modelRoute(rt Route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.ready.Load() {
			w.Header().Set("Retry-After", "5")
			writeDetail(w, http.StatusServiceUnavailable, s.model.Name()+" is starting: weights are loading and warming up")
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		if rt.Stream { // a websocket takes the turn per request (Turns)
			rt.Handler(sw, r, streamRecorder{stageRecorder{s.metrics}, s, rt.Counts})
			return
		}
		defer s.turn()()
		rt.Handler(sw, r, stageRecorder{s.metrics})
		if rt.Counts && sw.status == http.StatusOK {
			s.predicted()
		}
	}
}

// turn waits for the one-model-request-at-a-time lock and returns its release.
func (s *Server) turn() (release func()) {
	s.metrics.queued.Inc()
	s.exclusive.Lock()
	s.metrics.queued.Dec()
	return s.exclusive.Unlock
}

// predicted counts an answered prediction; the fault switch fires at its count.
func (s *Server) predicted() {
	n := s.predictions.Add(1)
	if s.opts.FaultExitAfter > 0 && n >= int64(s.opts.FaultExitAfter) {
		s.faultOnce.Do(func() { close(s.fault) })
	}
}

// streamRecorder is a Stream route's Turns.
type streamRecorder struct {
	stageRecorder
	s      *Server
	counts bool
}

func (r streamRecorder) Turn() func(ok bool) {
	release := r.s.turn()
	return func(ok bool) {
		release()
		if ok && r.counts {
			r.s.predicted()
		}
	}
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request, _ Recorder) {
	status, device := s.state()
	writeJSON(w, http.StatusOK, map[string]any{"status": status, "model": s.model.Name(), "device": device})
}

// state is what /health and the console report: "starting" until the model
// is loaded (no device yet), then "ok" and the device.
func (s *Server) state() (status string, device any) {
	if !s.ready.Load() {
		return "starting", nil
	}
	return "ok", s.model.Device()
}

// info is the model's Info with "routes": every route this server answers.
func (s *Server) info(w http.ResponseWriter, _ *http.Request, _ Recorder) {
	info := s.model.Info()
	routes := make([]map[string]string, 0, len(s.table))
	for _, r := range s.table {
		routes = append(routes, map[string]string{"method": r.Method, "path": r.Path, "what": r.What})
	}
	info["routes"] = routes
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request, _ Recorder) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": s.model.ModelCards()})
}

// Run serves on ln, loads the model in the background, and returns when ctx
// is cancelled (graceful shutdown: nil), when loading fails (its error), or
// when the fault switch fires (*FaultExit, after the last response is out).
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute, // a 32 MB body over a slow link
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
			s.ready.Store(true)
			s.log.Info("ready", "model", s.model.Name(), "device", s.model.Device(), "seconds", time.Since(start).Seconds())
		}
		loadErr <- err
	}()

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
			result = &FaultExit{Predictions: int(s.predictions.Load())}
			break wait
		case <-ctx.Done():
			s.log.Info("stop signal: shutting down", "grace", s.opts.ShutdownGrace)
			break wait
		}
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownGrace)
	defer cancel()
	err := hs.Shutdown(shutCtx)
	switch {
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
