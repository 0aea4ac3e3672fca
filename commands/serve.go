package commands

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/runner"
)

// exitRunning is serve's exit code when the package profile already runs.
const exitRunning = 3

// detachWatch is how long `serve --detach` watches a start for a crash.
const detachWatch = 10 * time.Second

func newServeCmd() *cobra.Command {
	var opts runner.PlanOptions
	var hostMode, detach bool
	var resetCmd string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "serve MANIFEST|DIR",
		Short: "Run a packaged model server (Docker engine, or the bare host) and wait until it is ready",
		Long: "serve starts the package built by `tt-model package` (build/<name>/ or its tt_kernel_manifest.json)\n" +
			"as container tt-model-<name>-<profile> on the Docker engine: the image is loaded from image/ when the\n" +
			"engine lacks it, the pinned weights are pulled into the host's HF cache first and HF_MODEL points at the\n" +
			"pinned snapshot, /dev/tenstorrent chips not used by other tt-model servers are passed in, the first\n" +
			"free port from 20000 is published. With --host, or when no engine answers, it runs\n" +
			"`tt-model supervise -- tt-model-server` on the host with the same env. It follows the logs until\n" +
			"the server is ready and prints how to reach it. A server that crashes while starting (the supervisor\n" +
			"backs off, or the engine restarts the container) stops the wait at once: its last lines are printed\n" +
			"with the commands to see the rest and to stop it, and serve exits 1. Exit 3 when that package\n" +
			"profile already runs.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			pkg, err := runner.LoadPackage(args[0])
			if err != nil {
				return packageLoadError(cmd, args[0], err)
			}
			// Both runners are listed even with --host: one package profile,
			// one server, whichever runner holds it.
			set, err := openRunners(cmd, !hostMode)
			if err != nil {
				return err
			}
			defer set.Close()
			var r runner.Runner = set.host
			if set.docker != nil && !hostMode {
				r = set.docker
			}
			if r.Kind() == "docker" && pkg.Dir == "" {
				return exitf(exitInvalid, "%s is an authored manifest: serve needs the built package (run `tt-model package --container %s`, then serve build/%s), or use --host", args[0], args[0], pkg.Wire.Name)
			}
			hf, err := hub.ConfigFromEnv(os.Getenv)
			if err != nil {
				return err
			}
			var snaps []*hub.Snapshot
			pulled := false
			prepare := func(spec *runner.Spec) error {
				if !pulled {
					var err error
					if snaps, err = runner.PullWeights(ctx, hub.NewClient(hf), pkg, stderr); err != nil {
						return err
					}
					if len(spec.Chips) == 0 {
						fmt.Fprintln(stderr, "no /dev/tenstorrent on this host: the server runs without chips (this build computes on the CPU)")
					}
					pulled = true
				}
				spec.HF, spec.Weights = hf, snaps
				if resetCmd != "" {
					spec.SupervisorFlags = []string{"--reset-cmd", resetCmd}
				}
				return nil
			}
			spec, inst, err := runner.Serve(ctx, r, pkg, set.listAll, opts, prepare, stderr)
			var running *runner.RunningError
			var plan *runner.PlanError
			switch {
			case errors.As(err, &running):
				return &ExitError{Code: exitRunning, Err: err}
			case errors.As(err, &plan):
				return &ExitError{Code: exitInvalid, Err: err}
			case err != nil:
				return &ExitError{Code: 1, Err: err}
			}
			if detach {
				// A server that cannot start mostly fails in its first
				// seconds: watch that long before saying it is starting.
				ready, err := runner.WatchStart(ctx, r, inst, spec.Launch, detachWatch)
				if err != nil {
					return &ExitError{Code: 1, Err: err}
				}
				printCard(stdout, spec, inst, ready)
				return nil
			}
			fmt.Fprintf(stderr, "waiting up to %s for %s to be ready (its output follows)\n", timeout, inst.Name)
			if err := runner.WaitReady(ctx, r, inst, spec.Launch, timeout, stderr); err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			printCard(stdout, spec, inst, true)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Profile, "profile", "", "serve profile (default: the package's default profile)")
	f.IntVar(&opts.Port, "port", 0, "host port (default: the first free port from 20000)")
	f.StringVar(&opts.DeviceIDs, "device-id", "", "chips to use, e.g. 0,1 or 0-3 (default: the lowest chips no other tt-model server holds)")
	f.StringVar(&opts.Bind, "bind", "", "host address the port is published on, e.g. 127.0.0.1 (default: every interface, as upstream)")
	f.BoolVar(&hostMode, "host", false, "run on the bare host under `tt-model supervise` instead of the Docker engine")
	f.DurationVar(&timeout, "timeout", 7*time.Minute, "how long to wait for the server to be ready (it keeps starting after)")
	f.StringVar(&resetCmd, "reset-cmd", "", "chip reset command for the supervisor, {chips} becomes the chip list (default: tt-smi -r {chips}; in a container it runs inside the image)")
	f.BoolVar(&detach, "detach", false, "return without waiting for the server to be ready (after watching its first 10 s for a crash)")
	return cmd
}

// printCard tells the user where the server is and how to use it.
func printCard(w io.Writer, spec *runner.Spec, inst *runner.Instance, ready bool) {
	state := "is ready"
	if !ready {
		state = "is starting (detached)"
	}
	where := "container " + inst.Name
	if inst.Runner == "host" {
		where = fmt.Sprintf("host process %s (supervisor pid %s)", inst.Name, inst.ID)
	}
	url := inst.URL()
	fmt.Fprintf(w, "%s %s: profile %s, %s\n", spec.Package.Wire.Name, state, spec.Profile.Name, where)
	fmt.Fprintf(w, "  url      %s\n", url)
	if len(spec.Chips) > 0 {
		fmt.Fprintf(w, "  chips    %s\n", runner.FormatChips(spec.Chips))
	} else {
		fmt.Fprintf(w, "  chips    none (no /dev/tenstorrent on this host)\n")
	}
	for _, s := range spec.Weights {
		fmt.Fprintf(w, "  weights  %s@%s\n", s.Repo, s.Commit)
	}
	fmt.Fprintf(w, "  try      curl -s %s/health\n", url)
	fmt.Fprintf(w, "           curl -s %s/v1/models\n", url)
	if spec.Package.Wire.Container.Runtime["model"] == "pi05" {
		fmt.Fprintf(w, "           curl -s %s/v1/actions/metadata\n", url)
	}
	if spec.Package.Wire.Container.Runtime["model"] == "rf-detr" {
		fmt.Fprintf(w, "           curl -s %s/predict -H 'Content-Type: application/json' -d \"{\\\"image\\\": \\\"$(base64 -w0 photo.jpg)\\\"}\"\n", url)
	}
	if inst.Bind == "" {
		fmt.Fprintf(w, "  exposed  port %d on every interface of this host (--bind 127.0.0.1 keeps it local)\n", inst.Port)
	} else {
		fmt.Fprintf(w, "  exposed  port %d on %s only\n", inst.Port, inst.Bind)
	}
	fmt.Fprintf(w, "  logs     tt-model logs %s --profile %s --runner %s -f\n", inst.Package, inst.Profile, inst.Runner)
	fmt.Fprintf(w, "  stop     tt-model stop %s --profile %s --runner %s\n", inst.Package, inst.Profile, inst.Runner)
}
