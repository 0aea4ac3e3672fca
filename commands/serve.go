package commands

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/runner"
	"github.com/ttmodel/tt-model/server/api"
)

// exitRunning is serve's exit code when the package profile already runs.
const exitRunning = 3

// detachWatch is how long `serve --detach` watches a start for a crash.
const detachWatch = 10 * time.Second

func newServeCmd() *cobra.Command {
	var opts runner.PlanOptions
	var hostMode, detach, printOnly, noWeights, refresh, localOnly, keep bool
	var resetCmd, apiKeyFile string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "serve MANIFEST|DIR|ORG/NAME[@REV] [-- SERVER ARGS...]",
		Short: "Run a packaged model server (Docker engine, or the bare host) and wait until it is ready",
		Long: "serve starts the package built by `tt-model package` (build/<name>/ or its tt_kernel_manifest.json),\n" +
			"or the package ORG/NAME pushed to the Hub (pulled into the local store first when missing; --refresh\n" +
			"asks the Hub where the branch points now, --local-only never uses the network), as container\n" +
			"tt-model-<name>-<profile> on the Docker engine: the image is loaded from image/ when the engine lacks\n" +
			"it, the pinned weights are pulled into the host's HF cache first (not with --no-weights: the server\n" +
			"then reads them from the cache itself) and HF_MODEL points at the pinned snapshot, /dev/tenstorrent\n" +
			"chips not used by other tt-model servers are passed in, the first free port from 20000 is published.\n" +
			"With --host, or when no engine answers, it runs `tt-model supervise -- tt-model-server` on the host\n" +
			"with the same env. Arguments after -- are appended to the server's command line. --print prints the\n" +
			"docker run (or host command) instead of running it. It follows the logs until the server is ready and\n" +
			"prints how to reach it. A server that crashes while starting (the supervisor backs off, or the engine\n" +
			"restarts the container) stops the wait at once: its last lines are printed with the commands to see\n" +
			"the rest and to stop it, and serve exits 1. Exit 3 when that package profile already runs.",
		Example: "  tt-model serve build/rf-detr\n" +
			"  tt-model serve acme/rf-detr@main --profile default\n" +
			"  tt-model serve acme/rf-detr --print\n" +
			"  tt-model serve acme/rf-detr --local-only -- --log-level debug",
		Args: func(cmd *cobra.Command, args []string) error {
			before := len(args)
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				before = dash
			}
			if before != 1 {
				return fmt.Errorf("serve takes one MANIFEST, DIR or ORG/NAME[@REV] (then -- and server arguments), got %d", before)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			extra := args[1:]
			hf, err := hub.ConfigFromEnv(os.Getenv)
			if err != nil {
				return err
			}
			client := hub.NewClient(hf)
			if localOnly {
				client = client.Offline()
			}
			pkg, err := loadServeTarget(cmd, client, args[0], runner.FetchOptions{Refresh: refresh, LocalOnly: localOnly, Progress: stderr})
			if err != nil {
				return err
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
			if pkg.Wire.Container.Kind == manifest.KindGoServer {
				if err := checkServerArgs(extra); err != nil {
					return &ExitError{Code: exitUsage, Err: err}
				}
			}
			if apiKeyFile != "" {
				if apiKeyFile, err = checkAPIKeyFile(pkg, apiKeyFile); err != nil {
					return &ExitError{Code: exitUsage, Err: err}
				}
			}
			if r.Kind() == "docker" && pkg.Dir == "" {
				return exitf(exitInvalid, "%s is an authored manifest: serve needs the built package (run `tt-model package --container %s`, then serve build/%s), or use --host", args[0], args[0], pkg.Wire.Name)
			}
			if noWeights && len(pkg.WeightRefs()) > 0 {
				fmt.Fprintf(stderr, "--no-weights: the weights are not pulled; they must already be in the HF cache (%s), where the server reads them\n", hf.CacheDir)
			}
			var snaps []*hub.Snapshot
			pulled := false
			prepare := func(spec *runner.Spec) error {
				if !pulled && !noWeights && !printOnly {
					var err error
					if snaps, err = runner.PullWeights(ctx, client, pkg, stderr); err != nil {
						return err
					}
					if len(spec.Chips) == 0 {
						fmt.Fprintln(stderr, "no /dev/tenstorrent on this host: the server runs without chips (this build computes on the CPU)")
					}
				}
				if printOnly && !noWeights {
					snaps = pinnedSnapshots(pkg)
				}
				pulled = true
				spec.HF, spec.Weights = hf, snaps
				spec.Launch.Argv = append(spec.Launch.Argv, extra...)
				if resetCmd != "" {
					spec.SupervisorFlags = []string{"--reset-cmd", resetCmd}
				}
				spec.APIKeyFile = apiKeyFile
				return nil
			}
			if printOnly {
				return printServeCommand(cmd, r, pkg, set.listAll, opts, prepare)
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
					return startFailed(cmd, r, inst, err, keep)
				}
				printCard(stdout, spec, inst, ready)
				return nil
			}
			fmt.Fprintf(stderr, "waiting up to %s for %s to be ready (its output follows; Ctrl-C stops it)\n", timeout, inst.Name)
			if err := runner.WaitReady(ctx, r, inst, spec.Launch, timeout, stderr); err != nil {
				if ctx.Err() != nil {
					// Ctrl-C in the foreground stops what serve started, as
					// `docker run` does; --detach is how to leave it running.
					return stopInterrupted(cmd, r, inst)
				}
				return startFailed(cmd, r, inst, err, keep)
			}
			printCard(stdout, spec, inst, true)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Profile, "profile", "", "serve profile (default: the package's default profile)")
	f.IntVar(&opts.Port, "port", 0, "host port (default: the first free port from 20000)")
	f.StringVar(&opts.DeviceIDs, "device-id", "", "chips to use, e.g. 0,1 or 0-3 (default: the lowest chips no other tt-model server holds)")
	f.StringVar(&opts.Bind, "bind", "127.0.0.1", "host address the port is published on; 0.0.0.0 lets other machines (robots) connect")
	f.StringVar(&apiKeyFile, "api-key-file", "", "file holding the API key the server then requires on every route but /health (given to it as a read-only file, never in argv or env)")
	f.BoolVar(&hostMode, "host", false, "run on the bare host under `tt-model supervise` instead of the Docker engine")
	f.DurationVar(&timeout, "timeout", 7*time.Minute, "how long to wait for the server to be ready (it keeps starting after)")
	f.StringVar(&resetCmd, "reset-cmd", "", "chip reset command for the supervisor, {chips} becomes the chip list (default: tt-smi -r {chips}; in a container it runs inside the image)")
	f.BoolVar(&detach, "detach", false, "return without waiting for the server to be ready (after watching its first 10 s for a crash); Ctrl-C then leaves it running")
	f.BoolVar(&keep, "keep", false, "leave a server that crashes while starting as it is (restarting, its logs readable) instead of stopping it")
	f.BoolVar(&printOnly, "print", false, "print the docker run (or host command) serve would run, and run nothing")
	f.BoolVar(&noWeights, "no-weights", false, "do not pull the pinned weights: they must already be in the HF cache")
	f.BoolVar(&refresh, "refresh", false, "ORG/NAME: ask the Hub where the revision points now, even when the package is in the local store")
	f.BoolVar(&localOnly, "local-only", false, "never use the network: the package and its weights must be in the local store")
	return cmd
}

// checkServerArgs parses args as tt-model-server's command line, so that a
// flag the server lacks is refused here rather than crash-looping the server
// serve starts.
func checkServerArgs(args []string) error {
	fs := flag.NewFlagSet("tt-model-server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f api.Flags
	f.Bind(fs, api.Kinds(), nil) // the help text is not shown: only the flags matter
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, "--"+f.Name) })
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("server arguments %q: %w; tt-model-server takes %s", args, err, strings.Join(names, ", "))
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("server arguments %q: unexpected %q: tt-model-server takes flags only (%s)", args, fs.Arg(0), strings.Join(names, ", "))
	}
	return nil
}

// exitInterrupted is serve's exit code after Ctrl-C (128 + SIGINT, as a
// shell reports it).
const exitInterrupted = 130

// interruptedStopGrace bounds the stop after Ctrl-C: a server still
// starting holds no requests, and a user waits on it.
const interruptedStopGrace = 30 * time.Second

// stopInterrupted stops and removes the instance serve started, after
// Ctrl-C while it waited for the server to be ready.
func stopInterrupted(cmd *cobra.Command, r runner.Runner, inst *runner.Instance) error {
	stderr := cmd.ErrOrStderr()
	fmt.Fprintf(stderr, "interrupted: stopping %s (serve --detach leaves a server running)\n", inst.Name)
	// The command's context is done: the stop gets one of its own.
	res, err := r.Stop(context.WithoutCancel(cmd.Context()), inst, interruptedStopGrace, stderr)
	if err != nil {
		return &ExitError{Code: exitInterrupted, Err: fmt.Errorf("interrupted, and stopping %s failed: %w", inst.Name, err)}
	}
	printStop(stderr, inst, res, interruptedStopGrace)
	return &ExitError{Code: exitInterrupted, Err: errors.New("interrupted")}
}

// startFailed reports a start that did not come up: a crash loop is stopped
// and removed unless keep, so it does not restart for ever behind the
// user's back; a server that is merely slow (not ready in time) keeps
// starting.
func startFailed(cmd *cobra.Command, r runner.Runner, inst *runner.Instance, err error, keep bool) error {
	var crash *runner.CrashError
	if !errors.As(err, &crash) || keep {
		return &ExitError{Code: 1, Err: err}
	}
	stderr := cmd.ErrOrStderr()
	res, stopErr := r.Stop(context.WithoutCancel(cmd.Context()), inst, interruptedStopGrace, stderr)
	if stopErr != nil {
		return &ExitError{Code: 1, Err: fmt.Errorf("%w\nstopping it failed too: %v", err, stopErr)}
	}
	crash.Stopped = true
	for _, d := range res.Detail {
		fmt.Fprintf(stderr, "  %s\n", d)
	}
	return &ExitError{Code: 1, Err: crash}
}

// checkAPIKeyFile is file made absolute, once it holds a key and the
// package's server reads one.
func checkAPIKeyFile(pkg *runner.Package, file string) (string, error) {
	if kind := pkg.Wire.Container.Kind; kind != manifest.KindGoServer {
		return "", fmt.Errorf("--api-key-file: a %s package's server does not read tt-model-server's key file; set its own option in the profile", kind)
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", fmt.Errorf("--api-key-file: %w", err)
	}
	if _, _, err := api.LoadAPIKey(abs, func(string) string { return "" }); err != nil {
		return "", err
	}
	return abs, nil
}

// loadServeTarget reads a manifest or package folder, or fetches the Hub
// package ORG/NAME[@REV] into the local store.
func loadServeTarget(cmd *cobra.Command, c *hub.Client, target string, fetch runner.FetchOptions) (*runner.Package, error) {
	ref, isRef := runner.ParseHubRef(target)
	if !isRef {
		if fetch.Refresh {
			return nil, exitf(exitInvalid, "--refresh applies to a Hub package ORG/NAME; %s is a local path", target)
		}
		pkg, err := runner.LoadPackage(target)
		if err != nil {
			return nil, packageLoadError(cmd, target, err)
		}
		return pkg, nil
	}
	if fetch.Refresh && fetch.LocalOnly {
		return nil, exitf(exitInvalid, "--refresh asks the Hub, --local-only forbids it: choose one")
	}
	pkg, snap, err := runner.FetchPackage(cmd.Context(), c, ref, fetch)
	if err != nil {
		return nil, &ExitError{Code: 1, Err: err}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "package %s@%s from the local store: %s\n", ref.Repo, snap.Commit, snap.Dir)
	return pkg, nil
}

// pinnedSnapshots are the weights snapshots the pins name, without asking
// anything: for --print, which must not download.
func pinnedSnapshots(pkg *runner.Package) []*hub.Snapshot {
	var out []*hub.Snapshot
	for _, ref := range pkg.WeightRefs() {
		if !hub.IsCommit(ref.Revision) {
			return nil // HF_MODEL stays the repo id
		}
		out = append(out, &hub.Snapshot{Repo: ref.Repo, Commit: ref.Revision})
	}
	return out
}

// printServeCommand plans the serve and prints the command it would run.
func printServeCommand(cmd *cobra.Command, r runner.Runner, pkg *runner.Package, list func(context.Context) ([]runner.Instance, error),
	opts runner.PlanOptions, prepare func(*runner.Spec) error) error {
	others, err := list(cmd.Context())
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	spec, err := runner.Plan(pkg, others, opts)
	if err != nil {
		return &ExitError{Code: exitInvalid, Err: err}
	}
	if err := prepare(spec); err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	// Where the server would find its weights, when they are cached; a
	// --print for a host that lacks them still prints the command.
	if spec.WeightsDir, err = runner.ServedWeights(pkg, spec.Launch.Env, spec.HF, spec.Weights); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: the weights are not in the HF cache yet; serve pulls them first, then HF_MODEL names their snapshot folder\n")
	}
	var line string
	switch rr := r.(type) {
	case *runner.Docker:
		if line, err = rr.RunCommand(cmd.Context(), spec); err != nil {
			return &ExitError{Code: 1, Err: err}
		}
	case *runner.Host:
		line = rr.Command(spec)
	}
	fmt.Fprintln(cmd.OutOrStdout(), line)
	return nil
}

// servedTestWeights are the notices of the weights the server reads when they are generated test
// weights: those pulled for it, else the folder HF_MODEL names.
func servedTestWeights(spec *runner.Spec) []string {
	notices := runner.TestWeightsNotices(spec.Weights)
	if len(spec.Weights) == 0 && spec.WeightsDir != "" {
		if what, ok := hub.TestWeightsIn(spec.WeightsDir); ok {
			repo, _, _ := hub.SnapshotOf(spec.WeightsDir)
			notices = map[string]string{repo: hub.TestWeightsNotice(repo, what)}
		}
	}
	out := make([]string, 0, len(notices))
	for _, s := range spec.Weights {
		if n, ok := notices[s.Repo]; ok {
			out = append(out, n)
			delete(notices, s.Repo)
		}
	}
	for _, n := range notices {
		out = append(out, n)
	}
	return out
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
	if spec.Package.Wire.Container.Kind == manifest.KindGoServer {
		fmt.Fprintf(w, "  console  %s/  (in a browser: status, latency, a form that tries the model)\n", url)
	}
	if len(spec.Chips) > 0 {
		fmt.Fprintf(w, "  chips    %s\n", runner.FormatChips(spec.Chips))
	} else {
		fmt.Fprintf(w, "  chips    none (no /dev/tenstorrent on this host)\n")
	}
	for _, s := range spec.Weights {
		fmt.Fprintf(w, "  weights  %s@%s\n", s.Repo, s.Commit)
	}
	for _, n := range servedTestWeights(spec) {
		fmt.Fprintf(w, "  WARNING  %s\n", n)
	}
	switch kind := spec.Package.Wire.Container.Kind; kind {
	case manifest.KindGoServer:
		fmt.Fprintf(w, "  try      curl -s %s/health\n", url)
		fmt.Fprintf(w, "           curl -s %s/v1/models\n", url)
		if spec.Package.Wire.Container.Runtime["model"] == "pi05" {
			fmt.Fprintf(w, "           curl -s %s/v1/actions/metadata\n", url)
		}
	case "vllm-plugin", "vllm-fork":
		fmt.Fprintf(w, "  try      curl -s %s/v1/models   (the OpenAI API)\n", url)
	default:
		fmt.Fprintf(w, "  api      the model's own routes (kind %s): see the package's README.md\n", kind)
	}
	if spec.Package.Wire.Container.Runtime["model"] == "rf-detr" {
		// The picture travels as the body, read from its file: a base64 argument would pass
		// Linux's 128 KiB limit on one argument for most photos.
		fmt.Fprintf(w, "           curl -s %s/predict -F image=@photo.jpg   (any PNG or JPEG file)\n", url)
		fmt.Fprintf(w, "           curl -s %s/predict -H 'Content-Type: image/jpeg' --data-binary @photo.jpg   (@- reads stdin)\n", url)
	}
	if spec.APIKeyFile != "" {
		fmt.Fprintf(w, "  auth     every route but /health needs the key: curl -H \"Authorization: Bearer $(cat %s)\" …, tt-model curl --api-key-file %s\n",
			spec.APIKeyFile, spec.APIKeyFile)
	}
	if ip := net.ParseIP(inst.Bind); ip == nil || ip.IsUnspecified() {
		open := ""
		if spec.APIKeyFile == "" {
			open = ", and so can anyone: --api-key-file requires a key"
		}
		fmt.Fprintf(w, "  exposed  port %d on every interface of this host: robots on the network can connect%s\n", inst.Port, open)
	} else {
		fmt.Fprintf(w, "  exposed  port %d on %s only; to let robots on the network connect, serve with --bind 0.0.0.0 --api-key-file KEYFILE\n", inst.Port, inst.Bind)
	}
	fmt.Fprintf(w, "  logs     tt-model logs %s --profile %s --runner %s -f\n", inst.Package, inst.Profile, inst.Runner)
	fmt.Fprintf(w, "  stop     tt-model stop %s --profile %s --runner %s\n", inst.Package, inst.Profile, inst.Runner)
}
