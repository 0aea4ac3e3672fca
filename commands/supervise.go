package commands

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ttmodel/tt-model/internal/chips"
	"github.com/ttmodel/tt-model/internal/journallog"
	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/supervisor"
)

// superviseFlags are the flags of `supervise`; `service install` takes the
// same ones and passes those it was given on to the unit's ExecStart.
type superviseFlags struct {
	manifest, profile string
	readyURL          string
	readyLine         string
	startTimeout      time.Duration
	stopGrace         time.Duration
	hangMarker        string
	resetCmd          string
	resetTimeout      time.Duration
	chips             string
	resetOnStart      string
	maxRestarts       int
	restartWindow     time.Duration
	statusAddr        string
	stateFile         string
	defaultEnv        []string
}

func (f *superviseFlags) bind(fs *pflag.FlagSet) {
	d := supervisor.Defaults(8000)
	fs.StringVar(&f.manifest, "manifest", "", "take the server's argv, env, port and readiness from a package's tt_kernel_manifest.json")
	fs.StringVar(&f.profile, "profile", "", "serve profile of --manifest (default: the package's default profile)")
	fs.StringVar(&f.readyURL, "ready-url", "", "ready when this URL answers JSON with \"status\":\"ok\" (default http://127.0.0.1:$PORT/health, PORT from the manifest or $PORT or 8000)")
	fs.StringVar(&f.readyLine, "ready-line", "", "ready when the server's output contains this text (instead of the URL)")
	fs.DurationVar(&f.startTimeout, "start-timeout", d.StartTimeout, "a server not ready by then is stopped and handled as a hang")
	fs.DurationVar(&f.stopGrace, "stop-grace", d.StopGrace, "SIGKILL a server this long after SIGTERM")
	fs.StringVar(&f.hangMarker, "hang-marker", "", "hang marker file (default the server's PI05_HANG_MARKER — the --manifest profile's, else this environment's, else --default-env's — or ~/.cache/pi05/hang_marker)")
	fs.StringVar(&f.resetCmd, "reset-cmd", d.ResetCmd, "chip reset command; {chips} becomes the chip list (no shell)")
	fs.DurationVar(&f.resetTimeout, "reset-timeout", d.ResetTimeout, "kill the reset command's process group after this long")
	fs.StringVar(&f.chips, "chips", "", "chips the server uses, e.g. 0,1 or 0-3 (default every /dev/tenstorrent/N)")
	fs.StringVar(&f.resetOnStart, "reset-on-start", string(d.ResetOnStart), "reset the chips before the first start: auto (when the hang marker exists), always (1) or never (0); default the server's PI05_RESET_ON_START, else auto")
	fs.IntVar(&f.maxRestarts, "max-restarts", d.MaxRestarts, "give up after this many restarts within --restart-window")
	fs.DurationVar(&f.restartWindow, "restart-window", d.RestartWindow, "window for --max-restarts")
	fs.StringVar(&f.statusAddr, "status-addr", "", "serve the status JSON (GET /status, and / for machines) and the status page (/ in a browser) on this address, e.g. 127.0.0.1:9100 (default off)")
	fs.StringVar(&f.stateFile, "state-file", "", "keep the status JSON (pids and start times, state, exit code at the end) in this file (default off)")
	fs.StringArrayVar(&f.defaultEnv, "default-env", nil, "`KEY=VALUE` for the server unless this environment sets KEY (repeatable; a --manifest profile's env wins over both): "+
		"how an image's entrypoint carries its packaged profile's variables, which docker run -e overrides as it would an image ENV")
}

// config builds the supervisor's Config from the flags and the server
// command given after --.
func (f *superviseFlags) config(fs *pflag.FlagSet, argv []string) (supervisor.Config, error) {
	port := 8000
	if p, err := strconv.Atoi(os.Getenv("PORT")); err == nil && p > 0 {
		port = p
	}
	var launch *manifest.Launch
	if f.manifest != "" {
		if len(argv) > 0 {
			return supervisor.Config{}, fmt.Errorf("give either --manifest or a server command after --, not both")
		}
		l, err := launchFromManifest(f.manifest, f.profile)
		if err != nil {
			return supervisor.Config{}, err
		}
		launch, argv, port = &l, l.Argv, l.Port
	} else if f.profile != "" {
		return supervisor.Config{}, fmt.Errorf("--profile needs --manifest")
	}

	env, err := f.serverEnv(launch)
	if err != nil {
		return supervisor.Config{}, err
	}
	cfg := supervisor.Defaults(port)
	cfg.Argv = argv
	cfg.Env = env
	if launch != nil {
		if launch.ReadyLine != "" {
			cfg.ReadyLine = launch.ReadyLine
		} else if launch.ReadyPath != "" {
			cfg.ReadyURL = fmt.Sprintf("http://127.0.0.1:%d%s", port, launch.ReadyPath)
		}
	}
	if fs.Changed("ready-url") {
		cfg.ReadyURL, cfg.ReadyLine = f.readyURL, ""
	}
	if fs.Changed("ready-line") {
		cfg.ReadyLine = f.readyLine
	}
	cfg.StartTimeout, cfg.StopGrace = f.startTimeout, f.stopGrace
	// The server's environment (what the supervisor adds, else this process's) says where the
	// hang marker is and when to reset, as the seed's server reads them; the flags win.
	serverEnv := func(k string) string {
		if env[k] != "" {
			return env[k]
		}
		return os.Getenv(k)
	}
	switch {
	case f.hangMarker != "":
		cfg.HangMarker = f.hangMarker
	case serverEnv("PI05_HANG_MARKER") != "":
		cfg.HangMarker = serverEnv("PI05_HANG_MARKER")
	}
	cfg.ResetCmd, cfg.ResetTimeout = f.resetCmd, f.resetTimeout
	reset, from := f.resetOnStart, "--reset-on-start"
	if v := serverEnv("PI05_RESET_ON_START"); v != "" && !fs.Changed("reset-on-start") {
		reset, from = v, "PI05_RESET_ON_START"
	}
	ros, err := supervisor.ParseResetOnStart(reset)
	if err != nil {
		return supervisor.Config{}, fmt.Errorf("%s=%w", from, err)
	}
	cfg.ResetOnStart = ros
	cfg.MaxRestarts, cfg.RestartWindow = f.maxRestarts, f.restartWindow
	cfg.StatusAddr, cfg.StateFile = f.statusAddr, f.stateFile
	if f.chips != "" {
		ids, err := chips.Parse(f.chips)
		if err != nil {
			return supervisor.Config{}, fmt.Errorf("--chips: %w", err)
		}
		cfg.Chips = ids
	}
	return cfg, cfg.Validate()
}

// serverEnv is what the supervisor adds to its own environment for the
// server: each --default-env whose key this process's environment lacks,
// then the --manifest profile's env over them.
func (f *superviseFlags) serverEnv(launch *manifest.Launch) (map[string]string, error) {
	env := map[string]string{}
	for _, kv := range f.defaultEnv {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t\n") {
			return nil, fmt.Errorf("--default-env %q: want KEY=VALUE", kv)
		}
		if _, set := os.LookupEnv(k); !set {
			env[k] = v
		}
	}
	if launch != nil {
		maps.Copy(env, launch.Env)
	}
	if len(env) == 0 {
		return nil, nil
	}
	return env, nil
}

// launchFromManifest resolves a package's profile into its server launch.
func launchFromManifest(path, profile string) (manifest.Launch, error) {
	w, err := manifest.ReadWire(path)
	if err != nil {
		return manifest.Launch{}, fmt.Errorf("--manifest: %w", err)
	}
	if w.Container == nil {
		return manifest.Launch{}, fmt.Errorf("--manifest %s: no container block, so no server to launch", path)
	}
	p, err := w.Container.ResolveProfile(profile)
	if err != nil {
		return manifest.Launch{}, fmt.Errorf("--manifest %s: %w", path, err)
	}
	repo := ""
	if w.Weights != nil {
		repo = w.Weights.Repo
	}
	l, err := manifest.LaunchFor(w.Container.Kind, w.Container.Runtime, repo, p)
	if err != nil {
		return manifest.Launch{}, fmt.Errorf("--manifest %s: profile %s: %w", path, p.Name, err)
	}
	return l, nil
}

func newSuperviseCmd() *cobra.Command {
	var f superviseFlags
	cmd := &cobra.Command{
		Use:   "supervise [flags] (--manifest FILE [--profile P] | -- SERVER ARGV...)",
		Short: "Run a model server and keep it alive: readiness, chip reset after a hang (exit 75), restarts, systemd notify, PID 1",
		Long: "supervise starts the server in its own process group and waits for it to be ready. Exit 75 or a start\n" +
			"timeout is a hang: the chips are reset (--reset-cmd, then a sysfs check) and the server starts again.\n" +
			"Other failures restart after a backoff, up to --max-restarts in --restart-window; then supervise exits\n" +
			"with the server's code. Under systemd (Type=notify) it sends READY=1, STATUS=, watchdog pings; as a\n" +
			"container's PID 1 it forwards signals and reaps orphans. SIGTERM/SIGINT stop the server, SIGHUP\n" +
			"restarts it.",
		Example: "  tt-model supervise --manifest build/rf-detr/tt_kernel_manifest.json --profile default\n" +
			"  tt-model supervise --chips 0-3 --start-timeout 7m -- tt-model-server --port 8000\n" +
			"  # an image's entrypoint: the packaged profile's variables, unless docker run -e sets them\n" +
			"  tt-model supervise --default-env PI05_LAYOUT=dp -- /usr/local/bin/tt-model-server --port 8000",
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := f.config(cmd.Flags(), args)
			if err != nil {
				return &ExitError{Code: 2, Err: err}
			}
			// Under systemd, its lines carry their priority (journalctl -p).
			h, logErr := journallog.Handler(cmd.ErrOrStderr(), nil)
			log := slog.New(h)
			if logErr != nil {
				log.Warn("log lines go without journal priorities", "err", logErr)
			}
			s, err := supervisor.New(cfg, log, os.Stdout, os.Stderr)
			if err != nil {
				return &ExitError{Code: 2, Err: err}
			}
			// The supervisor handles SIGINT and SIGTERM itself (stop the
			// server within the grace, then exit with its code), so the
			// CLI's signal context must not cut that short.
			code, err := s.Run(context.WithoutCancel(cmd.Context()))
			if err != nil {
				return &ExitError{Code: code, Err: err}
			}
			if code != 0 {
				return exitf(code, "supervise: exiting %d (see the log above)", code)
			}
			return nil
		},
	}
	f.bind(cmd.Flags())
	cmd.Flags().SetInterspersed(false) // flags after the server's name are the server's
	return cmd
}
