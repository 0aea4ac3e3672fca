package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
	prefix   string // install and uninstall: where the unit's copies live
}

// bindPrefix adds --prefix, for install and uninstall.
func (f *serviceFlags) bindPrefix(fs *pflag.FlagSet) {
	fs.StringVar(&f.prefix, "prefix", "", "`DIR` holding the unit's copies of tt-model, tt-model-server and the manifest "+
		"(default /usr/local/lib/tt-model/<name>, ~/.local/lib/tt-model/<name> for a --user unit)")
}

// prefixDir is --prefix made absolute, else the default for the unit name.
func (f *serviceFlags) prefixDir(name string) (string, error) {
	if f.prefix != "" {
		p, err := filepath.Abs(f.prefix)
		if err != nil {
			return "", fmt.Errorf("--prefix: %w", err)
		}
		return p, nil
	}
	if !f.user {
		return filepath.Join("/usr/local/lib/tt-model", name), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("a user unit's --prefix: %w", err)
	}
	return filepath.Join(home, ".local", "lib", "tt-model", name), nil
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
		runAs      string
	)
	cmd := &cobra.Command{
		Use:   "install (--manifest FILE [--profile P] | -- SERVER ARGV...) [--user] [--print]",
		Short: "Install a Type=notify systemd unit for `tt-model supervise` (--print shows it without installing)",
		Long: "install writes and enables <name>.service (it starts at the next boot; start it now with systemctl start),\n" +
			"whose ExecStart is `tt-model supervise` with the flags given here. It runs copies of tt-model,\n" +
			"tt-model-server and the manifest under --prefix (/usr/local/lib/tt-model/<name>), never the files of a\n" +
			"checkout; uninstall removes them. What systemd would not pass on from\n" +
			"this shell is recorded in the unit: a PATH of the folders that hold tt-model-server and the reset command\n" +
			"then the system's, the Hugging Face cache (HF_HOME, HF_HUB_CACHE), the hang marker (the unit's own,\n" +
			"/var/lib/<name>/hang_marker, unless --hang-marker or PI05_HANG_MARKER names one) and, for a server\n" +
			"command, the readiness URL. A system unit is sandboxed (ProtectSystem=strict, ProtectHome, PrivateTmp,\n" +
			"NoNewPrivileges) with the caches, the marker and the chip locks writable. docs/systemd.md explains the\n" +
			"unit line by line.",
		Example: "  tt-model service install --manifest build/rf-detr/tt_kernel_manifest.json\n" +
			"  sudo systemctl start tt-model-rf-detr\n" +
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
			state, err := unitStateDir(name, sf.user, os.Getenv)
			if err != nil {
				return &ExitError{Code: 2, Err: err}
			}
			// The supervisor's own default is pi0.5's ~/.cache/pi05/hang_marker: units of two
			// models would share it, and one's hang would reset the other's chips. Unless the
			// flag, the server's environment or this shell names one, each unit keeps its own.
			if !cmd.Flags().Changed("hang-marker") && cfg.Env["PI05_HANG_MARKER"] == "" && os.Getenv("PI05_HANG_MARKER") == "" {
				cfg.HangMarker = filepath.Join(state, "hang_marker")
			}
			execArgv, err := superviseExec(cmd.Flags(), sup, cfg, args)
			if err != nil {
				return &ExitError{Code: 2, Err: err}
			}
			prefix, err := sf.prefixDir(name)
			if err != nil {
				return &ExitError{Code: 2, Err: err}
			}
			execArgv, copies, programs := prefixCopies(prefix, execArgv, unitPrograms(cfg), os.Getenv)
			env, err := unitEnvironment(os.Getenv, programs)
			if err != nil {
				return &ExitError{Code: 2, Err: err}
			}
			if len(programs) < len(unitPrograms(cfg)) {
				env["PATH"] = filepath.Join(prefix, "bin") + string(filepath.ListSeparator) + env["PATH"]
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
			var writable []string
			if !sf.user {
				writable = unitWritablePaths(cfg, env, state)
			}
			unit := supervisor.Unit{
				WritablePaths: writable,
				Name:          name,
				Description:   "tt-model server " + what,
				Exec:          execArgv,
				Environment:   env,
				APIKeyFile:    apiKeyFile,
				User:          sf.user,
				Supervisor:    cfg,
				Watchdog:      watchdog,
				RestartSec:    5 * time.Second,
			}
			if runAs != "" {
				if sf.user {
					return &ExitError{Code: 2, Err: fmt.Errorf("--run-as names a system unit's user; a --user unit runs as the user whose manager runs it")}
				}
				unit.RunAs, unit.Group, _ = strings.Cut(runAs, ":")
				if unit.RunAs == "" {
					return &ExitError{Code: 2, Err: fmt.Errorf("--run-as %q: want USER or USER:GROUP", runAs)}
				}
				g, err := deviceGroup(cfg.DevDir)
				if err != nil {
					return err
				}
				if g != "" {
					unit.SupplementaryGroups = []string{g}
				}
			}
			if printOnly {
				text, err := unit.Render()
				if err != nil {
					return &ExitError{Code: 2, Err: err}
				}
				_, err = fmt.Fprint(cmd.OutOrStdout(), text)
				return err
			}
			if unit.RunAs != "" {
				if err := ensureServiceUser(cmd.Context(), unit.RunAs); err != nil {
					return err
				}
			}
			// ReadWritePaths= skips a folder that is not there, and the sandbox would then
			// refuse the marker: make its folder now (systemd makes the state folder), the
			// service user's when there is one.
			if dir := filepath.Dir(cfg.HangMarker); !sf.user && dir != state {
				if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
					if err := os.MkdirAll(dir, 0o755); err != nil {
						return fmt.Errorf("the hang marker's folder: %w", err)
					}
					if unit.RunAs != "" {
						if err := chownTo(dir, unit.RunAs); err != nil {
							return err
						}
					}
				}
			}
			if unit.RunAs != "" {
				if err := writableByUser(unit.RunAs, unit.WritablePaths); err != nil {
					return err
				}
			}
			svc, err := supervisor.NewService(unit)
			if err != nil {
				return err
			}
			if err := copyPrefix(prefix, name, copies); err != nil {
				return err
			}
			if err := svc.Install(); err != nil {
				return err
			}
			userFlag := ""
			if sf.user {
				userFlag = "--user "
			}
			fmt.Fprintf(cmd.OutOrStdout(), "installed and enabled %s.service (its programs and manifest copied to %s); start it with: systemctl %sstart %s\n",
				name, prefix, userFlag, name)
			return nil
		},
	}
	sf.bind(cmd.Flags())
	sf.bindPrefix(cmd.Flags())
	sup.bind(cmd.Flags())
	cmd.Flags().BoolVar(&printOnly, "print", false, "print the unit instead of installing it")
	cmd.Flags().StringVar(&apiKeyFile, "api-key-file", "", "file holding the API key tt-model-server then requires (a system unit loads it with LoadCredential=; never in argv or env)")
	cmd.Flags().StringVar(&runAs, "run-as", "", "run a system unit as `USER[:GROUP]` (User=, Group=) with the group that owns /dev/tenstorrent; "+
		serviceUser+" is created as a system user when it does not exist (as root), and the caches must be its to write")
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

// prefixOwner names, inside a prefix, the unit whose copies it holds:
// uninstall removes only a folder that says it is that unit's.
const prefixOwner = ".tt-model-service"

// prefixCopy is one file install copies under the prefix.
type prefixCopy struct{ src, dst string }

// prefixCopies points the unit at copies under prefix, so that it keeps
// running when the checkout or build tree it was installed from changes or
// goes: ExecStart's tt-model and --manifest, and each program the unit runs
// by name that the installer's PATH finds (tt-model-server) but the
// system's PATH does not. It returns the new ExecStart, the copies, and the
// programs the unit's PATH must still find (the reset command).
func prefixCopies(prefix string, execArgv, programs []string, getenv func(string) string) ([]string, []prefixCopy, []string) {
	bin := filepath.Join(prefix, "bin")
	argv := slices.Clone(execArgv)
	copies := []prefixCopy{{argv[0], filepath.Join(bin, "tt-model")}}
	argv[0] = copies[0].dst
	for i := 1; i+1 < len(argv) && argv[i] != "--"; i++ {
		if argv[i] == "--manifest" {
			c := prefixCopy{argv[i+1], filepath.Join(prefix, filepath.Base(argv[i+1]))}
			copies, argv[i+1] = append(copies, c), c.dst
			break
		}
	}
	var left []string
	for _, p := range programs {
		if p == "tt-model-server" {
			if src, err := lookPathIn(getenv("PATH"), p); err == nil {
				copies = append(copies, prefixCopy{src, filepath.Join(bin, p)})
				continue
			}
		}
		left = append(left, p)
	}
	return argv, copies, left
}

// lookPathIn finds the executable file name in the absolute folders of path.
func lookPathIn(path, name string) (string, error) {
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && filepath.IsAbs(d) && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found on PATH", name)
}

// copyPrefix writes the copies (each through a temporary file and a
// rename, so a running unit's program is replaced, not overwritten) and the
// owner file naming the unit.
func copyPrefix(prefix, name string, copies []prefixCopy) error {
	for _, c := range copies {
		if err := os.MkdirAll(filepath.Dir(c.dst), 0o755); err != nil {
			return fmt.Errorf("the unit's prefix: %w", err)
		}
		data, err := os.ReadFile(c.src)
		if err != nil {
			return fmt.Errorf("copy %s to the unit's prefix: %w", c.src, err)
		}
		fi, err := os.Stat(c.src)
		if err != nil {
			return fmt.Errorf("copy %s to the unit's prefix: %w", c.src, err)
		}
		tmp := c.dst + ".tmp"
		if err := os.WriteFile(tmp, data, fi.Mode().Perm()|0o444); err != nil {
			return fmt.Errorf("copy %s to %s: %w", c.src, c.dst, err)
		}
		if err := os.Rename(tmp, c.dst); err != nil {
			return fmt.Errorf("copy %s to %s: %w", c.src, c.dst, err)
		}
	}
	if err := os.WriteFile(filepath.Join(prefix, prefixOwner), []byte(name+"\n"), 0o644); err != nil {
		return fmt.Errorf("the unit's prefix: %w", err)
	}
	return nil
}

// removePrefix removes prefix when its owner file names the unit, and says
// whether it did; a folder that is not the unit's is left alone.
func removePrefix(prefix, name string) (bool, error) {
	owner, err := os.ReadFile(filepath.Join(prefix, prefixOwner))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("the unit's prefix: %w", err)
	}
	if strings.TrimSpace(string(owner)) != name {
		return false, fmt.Errorf("%s holds the copies of %s, not %s: left as it is", prefix, strings.TrimSpace(string(owner)), name)
	}
	if err := os.RemoveAll(prefix); err != nil {
		return false, fmt.Errorf("remove the unit's prefix: %w", err)
	}
	return true, nil
}

// unitStateDir is the folder a unit keeps its own files in (the hang
// marker): a system unit's StateDirectory, /var/lib/NAME, which systemd
// creates writable for the service; a user unit's $XDG_STATE_HOME/NAME
// (~/.local/state/NAME).
func unitStateDir(name string, user bool, getenv func(string) string) (string, error) {
	if !user {
		return filepath.Join("/var/lib", name), nil
	}
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, name), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("a user unit's state folder: %w", err)
	}
	return filepath.Join(home, ".local", "state", name), nil
}

// serviceUser is the system user `--run-as` creates when it is missing;
// any other user must exist.
const serviceUser = "tt-model"

// ensureServiceUser makes sure name exists, creating serviceUser with
// useradd --system when it does not.
func ensureServiceUser(ctx context.Context, name string) error {
	_, err := user.Lookup(name)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) && name == serviceUser {
		out, uerr := exec.CommandContext(ctx, "useradd", "--system", "--user-group", "--no-create-home",
			"--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name).CombinedOutput()
		if uerr != nil {
			return fmt.Errorf("--run-as %s: create the system user: %w: %s", name, uerr, bytes.TrimSpace(out))
		}
		_, err = user.Lookup(name)
	}
	if err != nil {
		return fmt.Errorf("--run-as %s: %w (create it with useradd --system, or name another user)", name, err)
	}
	return nil
}

// writableByUser says whether the user name can write the unit's writable
// paths: the sandbox opens them, the file modes still decide.
func writableByUser(name string, writable []string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("--run-as %s: %w", name, err)
	}
	gids, err := u.GroupIds()
	if err != nil {
		return fmt.Errorf("--run-as %s: its groups: %w", name, err)
	}
	for _, p := range writable {
		if err := writableBy(p, u.Uid, gids); err != nil {
			return fmt.Errorf("--run-as %s: %w: give it the folder (chown -R %s %s) or point the cache elsewhere", name, err, name, p)
		}
	}
	return nil
}

// chownTo gives dir to the user name and its primary group.
func chownTo(dir, name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("--run-as %s: %w", name, err)
	}
	uid, uerr := strconv.Atoi(u.Uid)
	gid, gerr := strconv.Atoi(u.Gid)
	if err := errors.Join(uerr, gerr); err != nil {
		return fmt.Errorf("--run-as %s: %w", name, err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return fmt.Errorf("--run-as %s: give it %s: %w", name, dir, err)
	}
	return nil
}

// writableBy says whether the user uid (in groups gids) can reach path
// (search permission on every folder above it) and write it; a path that
// does not exist yet is not checked.
func writableBy(path, uid string, gids []string) error {
	allowed := func(p string, bit os.FileMode) (bool, error) {
		fi, err := os.Stat(p)
		if err != nil {
			return false, err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || uid == "0" {
			return true, nil
		}
		m := fi.Mode().Perm()
		switch {
		case strconv.FormatUint(uint64(st.Uid), 10) == uid:
			return m&(bit<<6) != 0, nil
		case slices.Contains(gids, strconv.FormatUint(uint64(st.Gid), 10)):
			return m&(bit<<3) != 0, nil
		}
		return m&bit != 0, nil
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		if ok, err := allowed(d, 0o1); err != nil || !ok {
			return fmt.Errorf("%s: cannot pass through %s", path, d)
		}
		if d == "/" {
			break
		}
	}
	if ok, err := allowed(path, 0o2); err != nil || !ok {
		return fmt.Errorf("%s is not writable by it", path)
	}
	return nil
}

// deviceGroup is the group that owns the chips' device files under dir
// (/dev/tenstorrent/N), "" when there are none or root owns them.
func deviceGroup(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		return "", nil // no chips here: nothing to add
	}
	fi, err := os.Stat(filepath.Join(dir, entries[0].Name()))
	if err != nil {
		return "", fmt.Errorf("the chips' device group: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Gid == 0 {
		return "", nil
	}
	g, err := user.LookupGroupId(strconv.FormatUint(uint64(st.Gid), 10))
	if err != nil {
		return "", fmt.Errorf("the group of %s: %w", filepath.Join(dir, entries[0].Name()), err)
	}
	return g.Name, nil
}

// unitWritablePaths are what a system unit's sandbox leaves writable
// besides its state folder: the Hugging Face cache, the hang marker's
// folder, the chip locks' folder, a state file's folder and the caches the
// server's environment names.
func unitWritablePaths(cfg supervisor.Config, env map[string]string, state string) []string {
	var out []string
	add := func(p string) {
		if !filepath.IsAbs(p) {
			return
		}
		p = filepath.Clean(p)
		for _, have := range append([]string{state}, out...) {
			if p == have || strings.HasPrefix(p, have+"/") {
				return
			}
		}
		out = append(out, p)
	}
	add(env["HF_HOME"])
	add(env["HF_HUB_CACHE"])
	add(filepath.Dir(cfg.HangMarker))
	add(cfg.LockDir)
	if cfg.StateFile != "" {
		add(filepath.Dir(cfg.StateFile))
	}
	add(cfg.Env["TT_METAL_CACHE"])
	add(cfg.Env["TT_WEIGHT_CACHE"])
	return out
}

// unitPrograms are the programs the unit runs by a bare name, which its
// PATH must find: the server (a --manifest names it "tt-model-server") and
// the reset command (tt-smi is often in a virtualenv).
func unitPrograms(cfg supervisor.Config) []string {
	var names []string
	if len(cfg.Argv) > 0 {
		names = append(names, cfg.Argv[0])
	}
	if f := strings.Fields(cfg.ResetCmd); len(f) > 0 {
		names = append(names, f[0])
	}
	return slices.DeleteFunc(names, func(n string) bool { return strings.Contains(n, "/") })
}

// systemPath is the unit's PATH besides the folders of its programs: the
// system's own, as systemd gives a service.
const systemPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// unitEnvironment is what the unit's processes need from the installer's
// environment, which systemd does not pass on: a PATH of the folders where
// the installer's PATH finds programs (the unit runs them by name), then
// the system's, and nothing else of the installer's PATH; and the Hugging
// Face cache that `tt-model weights pull` filled (a system service has no
// HOME).
func unitEnvironment(getenv func(string) string, programs []string) (map[string]string, error) {
	env := map[string]string{}
	var dirs []string
	for _, p := range programs {
		if path, err := lookPathIn(getenv("PATH"), p); err == nil && !slices.Contains(dirs, filepath.Dir(path)) {
			dirs = append(dirs, filepath.Dir(path))
		}
	}
	for _, d := range filepath.SplitList(systemPath) {
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	env["PATH"] = strings.Join(dirs, string(filepath.ListSeparator))
	hf, err := hub.ConfigFromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("locate the Hugging Face cache for the unit: %w", err)
	}
	env["HF_HOME"], env["HF_HUB_CACHE"] = hf.HFHome, hf.CacheDir
	return env, nil
}

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
			prefix, err := sf.prefixDir(name)
			if err != nil {
				return err
			}
			removed, err := removePrefix(prefix, name)
			if err != nil {
				return err
			}
			if removed {
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", prefix)
			}
			return nil
		},
	}
	sf.bind(cmd.Flags())
	sf.bindPrefix(cmd.Flags())
	cmd.Flags().StringVar(&sf.manifest, "manifest", "", "name the unit after this package")
	return cmd
}

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
