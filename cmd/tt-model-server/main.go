// Command tt-model-server serves one model (pi0.5 or RF-DETR-base) over
// HTTP on this machine's CPU (the cgo megakernels of package native). The
// model is chosen by --model or from the environment (TT_RF_DETR_WEIGHTS,
// PI05_WEIGHTS_DIR, HF_MODEL); /health says
// "starting" until the weights are loaded and warmed up.
//
// Exit codes: 0 after SIGTERM/SIGINT, 1 when loading or serving fails,
// 2 for a bad flag or setting, 75 (pi0.5: PI05_HANG_EXIT_CODE) after a
// device hang, so the supervisor resets the chips and restarts the server;
// the test-only fault switch TT_MODEL_FAULT makes that happen on a CPU.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"

	"github.com/ttmodel/tt-model/internal/journallog"
	"github.com/ttmodel/tt-model/internal/version"
	"github.com/ttmodel/tt-model/native"
	"github.com/ttmodel/tt-model/native/packcache"
	"github.com/ttmodel/tt-model/server"
	"github.com/ttmodel/tt-model/server/api"
	"github.com/ttmodel/tt-model/server/memlimit"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], environment{get: os.Getenv, list: os.Environ}, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// config is everything the server reads from flags and the environment.
type config struct {
	host, port, model string
	kind, kindErr     string // resolved model, or why it could not be
	precision         native.Precision
	precisionVar      string // the variable precision came from
	threads           int
	fault             server.Fault
	cacheDir          string // packed weights and tuned GEMM plans ("" none)
	cacheNote         string // why there is none, when TT_WEIGHT_CACHE did not say off
	tuning            native.GEMMTuning
	logLevel          slog.Level
	requestMemory     int64  // the request memory budget in bytes (0: none)
	goMemory          string // what the Go memory limit will be (memlimit.Describe)
	apiKey, keySource string // the API key ("" none) and where it came from
}

// environment is the process environment: one variable, and all of them.
type environment struct {
	get  func(string) string
	list func() []string
}

func run(ctx context.Context, args []string, env environment, stdout, stderr io.Writer) int {
	getenv := env.get
	fs := flag.NewFlagSet("tt-model-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var fl api.Flags
	fl.Bind(fs, slices.Sorted(slices.Values(servedKinds())), weightsVars())
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: tt-model-server [flags]\n\n"+
			"Example:\n  TT_RF_DETR_WEIGHTS=/srv/rf-detr tt-model-server --port 8000\n"+
			"  tt-model-server --model pi05 --verify\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fl.Version {
		fmt.Fprintln(stdout, "tt-model-server", version.Version)
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tt-model-server: unexpected argument %q: the server takes flags only (see --help)\n", fs.Arg(0))
		return 2
	}
	cfg := config{host: fl.Host, port: fl.Port, model: fl.Model}
	if err := cfg.resolve(getenv, fl.LogLevel, fl.APIKeyFile); err != nil {
		fmt.Fprintln(stderr, "tt-model-server:", err)
		return 2
	}
	if fl.Verify {
		cfg.print(stdout)
		return 0
	}
	if cfg.kindErr != "" {
		fmt.Fprintln(stderr, "tt-model-server:", cfg.kindErr)
		return 2
	}
	// Under systemd (the supervisor passes its stderr on), its lines carry
	// their priority too.
	h, logErr := journallog.Handler(stderr, &slog.HandlerOptions{Level: cfg.logLevel})
	log := slog.New(h)
	if logErr != nil {
		log.Warn("log lines go without journal priorities", "err", logErr)
	}
	return serve(ctx, cfg, env, log)
}

// resolve checks flags and settings; an unresolvable model is kept as
// kindErr so --verify can still report the rest.
func (c *config) resolve(getenv func(string) string, level, apiKeyFile string) error {
	if err := c.logLevel.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	if p, err := strconv.Atoi(c.port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("--port %q: want a port number", c.port)
	}
	kind, err := selectModel(c.model, getenv)
	if err != nil && c.model != "" && c.model != "auto" {
		return err // an explicit --model must be known
	}
	if err != nil {
		c.kindErr = err.Error()
	}
	c.kind = kind
	// The served model's precision; before the model is known, every model's variable is checked.
	for _, m := range servedModels() {
		p, err := native.ParsePrecision(m.precisionVar, getenv(m.precisionVar), m.precisionDef, m.precisions...)
		if err != nil {
			return err
		}
		if m.kind == kind {
			c.precision, c.precisionVar = p, m.precisionVar
		}
	}
	if err := native.CheckISACap(getenv(native.ISACapEnv)); err != nil {
		return err
	}
	c.threads = native.DefaultThreads()
	if c.cacheDir, err = packcache.ResolveDir(getenv); err != nil {
		if getenv(packcache.EnvDir) != "" {
			return err // a setting that cannot be acted on
		}
		c.cacheNote = err.Error() // no default folder: run without, and say so
	}
	if c.tuning, err = native.GEMMTuningFromEnv(getenv, c.cacheDir); err != nil {
		return err
	}
	if c.requestMemory, err = server.RequestMemoryFromEnv(getenv); err != nil {
		return err
	}
	c.goMemory = memlimit.Describe(getenv, "/")
	if c.apiKey, c.keySource, err = api.LoadAPIKey(apiKeyFile, getenv); err != nil {
		return err
	}
	if getenv("TT_MODEL_FAULT_EXIT_AFTER") != "" {
		return fmt.Errorf("TT_MODEL_FAULT_EXIT_AFTER was replaced by TT_MODEL_FAULT=exit:after=N")
	}
	if c.fault, err = server.ParseFault(getenv("TT_MODEL_FAULT")); err != nil {
		return err
	}
	if m, ok := servedModelOf(kind); ok && !m.deviceFaults && (c.fault.Kind == "hang" || c.fault.Kind == "delay") {
		return fmt.Errorf("TT_MODEL_FAULT=%s needs the pi0.5 serving engine's devices; %s takes exit:after=N", getenv("TT_MODEL_FAULT"), m.name)
	}
	return nil
}

func (c *config) device() string {
	return fmt.Sprintf("cpu %s, %s, %d threads", native.DetectCPU().BestISA, c.precision, c.threads)
}

// cacheString says where packed weights are kept.
func (c *config) cacheString() string {
	switch {
	case c.cacheDir != "":
		return c.cacheDir + " (packed weights and tuned GEMM plans; " + packcache.EnvDir + ")"
	case c.cacheNote != "":
		return "none: " + c.cacheNote
	}
	return "none (" + packcache.EnvDir + "=off)"
}

func (c *config) print(w io.Writer) {
	model := c.kind
	if model == "" {
		model = "chosen at start (" + c.kindErr + ")"
	}
	fmt.Fprintf(w, "tt-model-server %s\n", version.Version)
	fmt.Fprintf(w, "model:     %s\n", model)
	fmt.Fprintf(w, "listen:    %s\n", net.JoinHostPort(c.host, c.port))
	if c.precisionVar != "" {
		fmt.Fprintf(w, "precision: %s (%s)\n", c.precision, c.precisionVar)
	} else {
		fmt.Fprintln(w, "precision: chosen with the model")
	}
	fmt.Fprintf(w, "threads:   %d (TT_NUM_THREADS, else usable CPUs)\n", c.threads)
	fmt.Fprintf(w, "cache:     %s\n", c.cacheString())
	fmt.Fprintf(w, "gemm:      %s\n", c.tuning)
	fmt.Fprintf(w, "requests:  %s\n", requestMemoryString(c.requestMemory))
	fmt.Fprintf(w, "go memory: %s\n", c.goMemory)
	fmt.Fprintf(w, "auth:      %s\n", c.authString())
	fmt.Fprintf(w, "cpu:       %s\n", native.DetectCPU())
	fmt.Fprintln(w, "weights:   not opened (--verify)")
}

// authString says whether requests need the API key, and where it came
// from; never the key.
func (c *config) authString() string {
	if c.apiKey == "" {
		return "none: every route answers anyone who reaches the port (--api-key-file or " + api.APIKeyEnv + " requires a key)"
	}
	return "API key required on every route but /health and /healthz (from " + c.keySource + ")"
}

// requestMemoryString says what the request memory budget is.
func requestMemoryString(n int64) string {
	if n == 0 {
		return "no memory budget (" + server.RequestMemoryEnv + "=0)"
	}
	return fmt.Sprintf("%d MiB memory budget for bodies and decoded images (%s)", n>>20, server.RequestMemoryEnv)
}

func serve(ctx context.Context, c config, env environment, log *slog.Logger) int {
	entry, _ := servedModelOf(c.kind) // resolve made c.kind one of them
	m, err := entry.build(env, c)
	if err != nil {
		log.Error(c.kind+" settings", "err", err)
		return 2
	}
	log.Info("packed weights cache", "cache", c.cacheString(), "gemm", c.tuning.String())
	if c.fault.Kind == "exit" {
		log.Warn("test-only fault switch armed", "TT_MODEL_FAULT", c.fault.String())
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(c.host, c.port))
	if err != nil {
		log.Error("listen", "err", err)
		return 1
	}
	limiter := memlimit.Start(env.get, "/", log)
	log.Info("request memory budget", "budget", requestMemoryString(c.requestMemory))
	log.Info("authentication", "auth", c.authString())
	srv := server.New(m, server.Options{Log: log, Fault: c.fault, RequestMemory: c.requestMemory, Loaded: limiter.ModelLoaded, APIKey: c.apiKey})
	err = srv.Run(ctx, ln)
	var exit *server.ExitError
	switch {
	case errors.As(err, &exit):
		log.Error(exit.Error())
		return exit.Code
	case err != nil:
		log.Error("server stopped", "err", err)
		return 1
	}
	log.Info("stopped")
	return 0
}
