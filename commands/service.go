package commands

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/server/api"
	"github.com/ttmodel/tt-model/supervisor"
)

// serviceFlags name the unit that `service` installs, removes or queries.
type serviceFlags struct {
	name     string
	user     bool
	manifest string // also a supervise flag; here it names the unit too
}

func (f *serviceFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.name, "name", "", "unit name without .service (default tt-model-<package name>, or tt-model-<server program>)")
	fs.BoolVar(&f.user, "user", false, "a user unit (~/.config/systemd/user) instead of a system one")
}

// unitName is --name, else tt-model-<package name>, else
// tt-model-<server program>.
func (f *serviceFlags) unitName(argv []string) (string, error) {
	switch {
	case f.name != "":
		return f.name, nil
	case f.manifest != "":
		w, err := manifest.ReadWire(f.manifest)
		if err != nil {
			return "", fmt.Errorf("--manifest: %w", err)
		}
		return "tt-model-" + w.Name, nil
	case len(argv) > 0:
		return "tt-model-" + strings.TrimPrefix(filepath.Base(argv[0]), "tt-model-"), nil
	}
	return "", fmt.Errorf("name the unit: --name, --manifest or a server command")
}

// Deliberate twin of newWeightsCmd in commands/weights.go: every command's constructor is one
// cobra.Command literal (Use, Short, Long, Example, Args, RunE) of the same shape; what fills it is
// this command's own.
func newServiceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "service",
		Short:   "Install, remove or query a systemd unit that runs `tt-model supervise`",
		Example: "  tt-model service install --manifest build/rf-detr/tt_kernel_manifest.json --print\n  tt-model service status --name tt-model-rf-detr",
	}
	cmd.AddCommand(newServiceInstallCmd(), newServiceUninstallCmd(), newServiceStatusCmd())
	return cmd
}

func newServiceInstallCmd() *cobra.Command {
	var (
		sf         serviceFlags
		sup        superviseFlags
		printOnly  bool
		watchdog   time.Duration
		apiKeyFile string
	)
	cmd := &cobra.Command{
		Use:   "install (--manifest FILE [--profile P] | -- SERVER ARGV...) [--user] [--print]",
		Short: "Install a Type=notify systemd unit for `tt-model supervise` (--print shows it without installing)",
		Long: "install writes and enables <name>.service, whose ExecStart is `tt-model supervise` with the flags given\n" +
			"here. What systemd would not pass on from this shell is recorded in the unit: the PATH (it finds\n" +
			"tt-model-server and the reset command), the Hugging Face cache (HF_HOME, HF_HUB_CACHE), the hang\n" +
			"marker and, for a server command, the readiness URL. docs/systemd.md explains the unit line by line.",
		Example: "  tt-model service install --manifest build/rf-detr/tt_kernel_manifest.json\n" +
			"  sudo systemctl enable --now tt-model-rf-detr\n" +
			"  tt-model service install --user --print -- /opt/bin/my-server --port 8000",
		RunE: func(cmd *cobra.Command, args []string) error {
			sf.manifest = sup.manifest
			// Check the flags and the package now rather than at the unit's first start.
			cfg, err := sup.config(cmd.Flags(), args)
			if err != nil {
				return &ExitError{Code: 2, Err: err}
			}
			name, err := sf.unitName(args)
			if err != nil {
				return &ExitError{Code: 2, Err: err}
			}
			execArgv, err := superviseExec(cmd.Flags(), sup, cfg, args)
			if err != nil {
				return &ExitError{Code: 2, Err: err}
			}
			env, err := unitEnvironment(os.Getenv)
			if err != nil {
				return &ExitError{Code: 2, Err: err}
			}
			what := strings.Join(args, " ")
			if sup.manifest != "" {
				what = strings.TrimPrefix(name, "tt-model-")
				if sup.profile != "" {
					what += " (profile " + sup.profile + ")"
				}
			}
			if apiKeyFile != "" {
				if apiKeyFile, err = filepath.Abs(apiKeyFile); err != nil {
					return &ExitError{Code: 2, Err: fmt.Errorf("--api-key-file: %w", err)}
				}
				if _, _, err := api.LoadAPIKey(apiKeyFile, func(string) string { return "" }); err != nil {
					return &ExitError{Code: 2, Err: err}
				}
			}
			unit := supervisor.Unit{
				Name:        name,
				Description: "tt-model server " + what,
				Exec:        execArgv,
				Environment: env,
				APIKeyFile:  apiKeyFile,
				User:        sf.user,
				Supervisor:  cfg,
				Watchdog:    watchdog,
				RestartSec:  5 * time.Second,
			}
			if printOnly {
				text, err := unit.Render()
				if err != nil {
					return &ExitError{Code: 2, Err: err}
				}
				_, err = fmt.Fprint(cmd.OutOrStdout(), text)
				return err
			}
			svc, err := supervisor.NewService(unit)
			if err != nil {
				return err
			}
			if err := svc.Install(); err != nil {
				return err
			}
			userFlag := ""
			if sf.user {
				userFlag = "--user "
			}
			fmt.Fprintf(cmd.OutOrStdout(), "installed and enabled %s.service; start it with: systemctl %sstart %s\n", name, userFlag, name)
			return nil
		},
	}
	sf.bind(cmd.Flags())
	sup.bind(cmd.Flags())
	cmd.Flags().BoolVar(&printOnly, "print", false, "print the unit instead of installing it")
	cmd.Flags().StringVar(&apiKeyFile, "api-key-file", "", "file holding the API key tt-model-server then requires (a system unit loads it with LoadCredential=; never in argv or env)")
	cmd.Flags().DurationVar(&watchdog, "watchdog", 60*time.Second, "WatchdogSec: systemd stops the service when the server stops answering its readiness probe this long")
	cmd.Flags().SetInterspersed(false)
	return cmd
}

// superviseExec is the unit's ExecStart: this binary, "supervise", the
// supervise flags the user gave (paths made absolute), the defaults that
// depend on the installer's environment as resolved now (cfg), then the
// server.
func superviseExec(fs *pflag.FlagSet, sup superviseFlags, cfg supervisor.Config, argv []string) ([]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locate the tt-model binary: %w", err)
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return nil, fmt.Errorf("locate the tt-model binary: %w", err)
	}
	out := []string{self, "supervise"}
	supervise := pflag.NewFlagSet("supervise", pflag.ContinueOnError)
	(&superviseFlags{}).bind(supervise)
	var visitErr error
	fs.Visit(func(f *pflag.Flag) {
		if supervise.Lookup(f.Name) == nil {
			return // a service flag (--name, --user, --print, --watchdog)
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok { // --default-env: once per value
			for _, v := range sv.GetSlice() {
				out = append(out, "--"+f.Name, v)
			}
			return
		}
		v := f.Value.String()
		if f.Name == "manifest" || f.Name == "hang-marker" {
			abs, err := filepath.Abs(v)
			if err != nil {
				visitErr = fmt.Errorf("--%s %s: %w", f.Name, v, err)
			}
			v = abs
		}
		out = append(out, "--"+f.Name, v)
	})
	if visitErr != nil {
		return nil, visitErr
	}
	// The unit does not see $PI05_HANG_MARKER, $HOME or $PORT as the
	// installer did: pin what they chose.
	if !fs.Changed("hang-marker") {
		out = append(out, "--hang-marker", cfg.HangMarker)
	}
	if sup.manifest == "" && !fs.Changed("ready-url") && !fs.Changed("ready-line") {
		out = append(out, "--ready-url", cfg.ReadyURL)
	}
	if len(argv) == 0 {
		return out, nil
	}
	server := argv[0]
	if !strings.Contains(server, "/") {
		// systemd's PATH is not the user's: pin the program found now.
		if server, err = exec.LookPath(server); err != nil {
			return nil, fmt.Errorf("server command: %w", err)
		}
	}
	if server, err = filepath.Abs(server); err != nil {
		return nil, fmt.Errorf("server command: %w", err)
	}
	// Caught here, not at each start (which would fail with 127).
	if fi, err := os.Stat(server); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("server command %s: not an executable file", server)
	}
	return append(append(out, "--", server), argv[1:]...), nil
}

// unitEnvironment is what the unit's processes need from the installer's
// environment, which systemd does not pass on: the PATH that finds the
// server (a --manifest names it "tt-model-server") and the reset command
// (tt-smi is often in a virtualenv), and the Hugging Face cache that
// `tt-model weights pull` filled (a system service has no HOME).
func unitEnvironment(getenv func(string) string) (map[string]string, error) {
	env := map[string]string{}
	var dirs []string
	for _, d := range filepath.SplitList(getenv("PATH")) {
		if filepath.IsAbs(d) && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) > 0 {
		env["PATH"] = strings.Join(dirs, string(filepath.ListSeparator))
	}
	hf, err := hub.ConfigFromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("locate the Hugging Face cache for the unit: %w", err)
	}
	env["HF_HOME"], env["HF_HUB_CACHE"] = hf.HFHome, hf.CacheDir
	return env, nil
}

// Deliberate twin of newProfilesCmd in commands/profiles.go, newSuperviseCmd in
// commands/supervise.go, newServiceStatusCmd: every command's constructor is one cobra.Command
// literal (Use, Short, Long, Example, Args, RunE) of the same shape; what fills it is this
// command's own.
func newServiceUninstallCmd() *cobra.Command {
	var sf serviceFlags
	cmd := &cobra.Command{
		Use:   "uninstall (--name NAME | --manifest FILE) [--user]",
		Short: "Stop, disable and delete a unit installed by `service install`",
		Example: "  tt-model service uninstall --manifest build/rf-detr/tt_kernel_manifest.json\n" +
			"  tt-model service uninstall --user --name tt-model-my-server",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, name, err := sf.open()
			if err != nil {
				return err
			}
			if err := svc.Uninstall(cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s.service\n", name)
			return nil
		},
	}
	sf.bind(cmd.Flags())
	cmd.Flags().StringVar(&sf.manifest, "manifest", "", "name the unit after this package")
	return cmd
}

// Deliberate twin of newServiceUninstallCmd: every command's constructor is one cobra.Command
// literal (Use, Short, Long, Example, Args, RunE) of the same shape; what fills it is this
// command's own.
func newServiceStatusCmd() *cobra.Command {
	var sf serviceFlags
	cmd := &cobra.Command{
		Use:   "status (--name NAME | --manifest FILE) [--user]",
		Short: "Show systemd's state of a unit installed by `service install`, with the supervisor's status line",
		Long: "status prints systemd's ActiveState (SubState), the result of a failure, the supervisor's last STATUS=\n" +
			"line and how often systemd restarted the unit. Exit 3 when the unit is not installed.",
		Example: "  tt-model service status --name tt-model-rf-detr\n" +
			"  # tt-model-rf-detr.service: active (running); ready: server ready (start 1)",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, name, err := sf.open()
			if err != nil {
				return err
			}
			st, err := svc.State(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s.service: %s\n", name, st)
			if !st.Installed() {
				return &ExitError{Code: 3, Err: fmt.Errorf("%s.service is not installed", name)}
			}
			return nil
		},
	}
	sf.bind(cmd.Flags())
	cmd.Flags().StringVar(&sf.manifest, "manifest", "", "name the unit after this package")
	return cmd
}

// open finds the unit for uninstall and status; only its name and kind
// matter there, so the command line in it is a placeholder.
func (f *serviceFlags) open() (*supervisor.Service, string, error) {
	name, err := f.unitName(nil)
	if err != nil {
		return nil, "", &ExitError{Code: 2, Err: err}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("locate the tt-model binary: %w", err)
	}
	svc, err := supervisor.NewService(supervisor.Unit{
		Name: name, Description: name, Exec: []string{self, "supervise"}, User: f.user,
		Supervisor: supervisor.Defaults(8000), Watchdog: time.Minute, RestartSec: 5 * time.Second,
	})
	if err != nil {
		return nil, "", err
	}
	return svc, name, nil
}
