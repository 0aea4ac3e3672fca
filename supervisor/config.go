package supervisor

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ttmodel/tt-model/internal/chips"
	"github.com/ttmodel/tt-model/internal/hangmarker"
)

// HangExitCode is the exit code a server uses to say its chips hung
// (EX_TEMPFAIL). The supervisor resets the chips and starts it again, and
// exits with it when the chips cannot be recovered.
const HangExitCode = 75

// DefaultResetCmd resets the chips with Tenstorrent's tool; {chips} becomes
// the chip list.
const DefaultResetCmd = "tt-smi -r {chips}"

// ResetOnStart says when the chips are reset before a start.
type ResetOnStart string

// The --reset-on-start values.
const (
	ResetAuto   ResetOnStart = "auto"   // when the hang marker exists
	ResetAlways ResetOnStart = "always" // before the first start
	ResetNever  ResetOnStart = "never"
)

// ParseResetOnStart reads --reset-on-start or PI05_RESET_ON_START: auto, always or never, or
// the seed's values auto, 1 and 0.
func ParseResetOnStart(s string) (ResetOnStart, error) {
	switch s {
	case "auto":
		return ResetAuto, nil
	case "always", "1":
		return ResetAlways, nil
	case "never", "0":
		return ResetNever, nil
	}
	return "", fmt.Errorf("%q: want auto, 1 (always) or 0 (never)", s)
}

// Config is everything a supervisor run needs. Durations are data, so tests
// use short ones; Defaults gives the production values.
type Config struct {
	// Argv is the server command line; Env is added to (and overrides) the
	// supervisor's own environment, minus the systemd variables.
	Argv []string          `json:"argv"`
	Env  map[string]string `json:"env,omitempty"`

	// ReadyURL is polled until it answers JSON with "status":"ok"; ReadyLine,
	// when set, replaces it: ready once the server's output contains it.
	ReadyURL      string        `json:"ready_url,omitempty"`
	ReadyLine     string        `json:"ready_line,omitempty"`
	ProbeInterval time.Duration `json:"probe_interval"`
	ProbeTimeout  time.Duration `json:"probe_timeout"`

	StartTimeout time.Duration `json:"start_timeout"`
	StopGrace    time.Duration `json:"stop_grace"`
	// KillTimeout is how long a process SIGKILLed by the supervisor (the
	// server after the stop grace, the reset command) may take to be
	// reaped before it counts as stuck in the driver. A reap needs the
	// dying process scheduled and its device files released, which on a
	// loaded host takes longer than any stop grace a test would use.
	KillTimeout time.Duration `json:"kill_timeout"`

	HangMarker   string        `json:"hang_marker"`
	ResetCmd     string        `json:"reset_cmd"`
	ResetTimeout time.Duration `json:"reset_timeout"`
	ResetOnStart ResetOnStart  `json:"reset_on_start"`
	// ResetAttempts is how many times a reset is tried before the chips
	// count as unrecoverable; ResetBackoff is the pause after the first
	// failed attempt, doubled after each further one.
	ResetAttempts int           `json:"reset_attempts"`
	ResetBackoff  time.Duration `json:"reset_backoff"`

	// Chips are the logical chip ids; nil means every /dev/tenstorrent/N.
	Chips []int `json:"chips,omitempty"`
	// DevDir and SysfsDir locate the device nodes and their sysfs class
	// directories (tests point them at fakes).
	DevDir   string `json:"dev_dir"`
	SysfsDir string `json:"sysfs_dir"`
	// HeartbeatInterval is the gap between the two tt_heartbeat reads that
	// must differ; ChipCheckTimeout bounds the whole post-reset check.
	HeartbeatInterval time.Duration `json:"heartbeat_interval"`
	ChipCheckTimeout  time.Duration `json:"chip_check_timeout"`
	// LockDir holds the per-chip lock files.
	LockDir string `json:"lock_dir"`

	MaxRestarts   int           `json:"max_restarts"`
	RestartWindow time.Duration `json:"restart_window"`
	BackoffMin    time.Duration `json:"backoff_min"`
	BackoffMax    time.Duration `json:"backoff_max"`
	// BackoffReset is how long a server must have been ready for the backoff
	// to start again from BackoffMin.
	BackoffReset time.Duration `json:"backoff_reset"`

	// ExtendInterval is how often EXTEND_TIMEOUT_USEC is repeated while
	// starting or resetting before the first READY=1.
	ExtendInterval time.Duration `json:"extend_interval"`

	StatusAddr string `json:"status_addr,omitempty"`
	// StateFile, when set, is kept equal to the status JSON (the
	// supervisor's and the server's pid and start time, the state, and at
	// the end the exit code): the host runner's stop and ps read it.
	StateFile string `json:"state_file,omitempty"`
}

// Defaults returns the production settings for a server on port; the hang
// marker follows $PI05_HANG_MARKER like the pi0.5 server does.
func Defaults(port int) Config {
	return Config{
		ReadyURL:          fmt.Sprintf("http://127.0.0.1:%d/health", port),
		ProbeInterval:     500 * time.Millisecond,
		ProbeTimeout:      5 * time.Second,
		StartTimeout:      7 * time.Minute,
		StopGrace:         120 * time.Second,
		KillTimeout:       30 * time.Second,
		HangMarker:        hangmarker.Default(os.Getenv),
		ResetCmd:          DefaultResetCmd,
		ResetTimeout:      180 * time.Second,
		ResetOnStart:      ResetAuto,
		ResetAttempts:     3,
		ResetBackoff:      5 * time.Second,
		DevDir:            "/dev/tenstorrent",
		SysfsDir:          "/sys/class/tenstorrent",
		HeartbeatInterval: time.Second,
		ChipCheckTimeout:  60 * time.Second,
		LockDir:           DefaultLockDir(),
		MaxRestarts:       5,
		RestartWindow:     30 * time.Minute,
		BackoffMin:        100 * time.Millisecond,
		BackoffMax:        30 * time.Second,
		BackoffReset:      10 * time.Minute,
		ExtendInterval:    30 * time.Second,
	}
}

// DefaultLockDir is /run/lock when this user can write there (shared by every
// user of the host), else $XDG_RUNTIME_DIR, else the temp dir.
func DefaultLockDir() string {
	if f, err := os.CreateTemp("/run/lock", ".tt-model-probe-*"); err == nil {
		name := f.Name()
		f.Close()
		os.Remove(name)
		return "/run/lock"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return d
	}
	return os.TempDir()
}

// ResetBudget is the longest one chip reset may take: every attempt's reset
// command running to its timeout, killed and reaped, and its chip check
// running to its timeout.
func (c *Config) ResetBudget() time.Duration {
	return time.Duration(c.ResetAttempts) * (c.ResetTimeout + c.KillTimeout + c.ChipCheckTimeout)
}

// StopBudget is the longest the supervisor's stop of a server may take:
// SIGTERM, the stop grace, SIGKILL, then up to KillTimeout for the reap
// (after which the server counts as stuck and the supervisor exits 75). A
// stop requested during a reset takes at most KillTimeout. A service
// manager's stop timeout must exceed it (Unit.Render).
func (c *Config) StopBudget() time.Duration {
	return c.StopGrace + c.KillTimeout
}

// resetsWithoutChips says whether a host without chips still runs the reset
// command after a hang. A site's own --reset-cmd does (it may not need device
// nodes: a BMC power cycle, a test's recorder), with {chips} empty; the
// default tt-smi -r has nothing to reset there, so CPU-only hosts skip it.
// The chip check is skipped either way: there are no chips to look at.
func (c *Config) resetsWithoutChips() bool {
	return strings.Join(strings.Fields(c.ResetCmd), " ") != DefaultResetCmd
}

// Validate checks the settings and says which one is wrong.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		bad("no server command: give one after -- or use --manifest")
	}
	if c.ReadyLine == "" {
		u, err := url.Parse(c.ReadyURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			bad("--ready-url %q: want an http(s) URL", c.ReadyURL)
		} else if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				bad("--ready-url %q: port %s is not 1-65535", c.ReadyURL, p)
			}
		}
	}
	for name, d := range map[string]time.Duration{
		"--start-timeout": c.StartTimeout, "--stop-grace": c.StopGrace, "kill timeout": c.KillTimeout, "--reset-timeout": c.ResetTimeout,
		"--restart-window": c.RestartWindow, "probe interval": c.ProbeInterval, "probe timeout": c.ProbeTimeout,
		"backoff min": c.BackoffMin, "backoff max": c.BackoffMax, "heartbeat interval": c.HeartbeatInterval,
		"chip check timeout": c.ChipCheckTimeout, "extend interval": c.ExtendInterval, "reset backoff": c.ResetBackoff,
	} {
		if d <= 0 {
			bad("%s must be positive, got %s", name, d)
		}
	}
	if c.BackoffMax < c.BackoffMin {
		bad("backoff max %s is below backoff min %s", c.BackoffMax, c.BackoffMin)
	}
	if c.MaxRestarts < 0 {
		bad("--max-restarts must be >= 0, got %d", c.MaxRestarts)
	}
	if c.ResetAttempts < 1 {
		bad("reset attempts must be >= 1, got %d", c.ResetAttempts)
	}
	switch c.ResetOnStart {
	case ResetAuto, ResetAlways, ResetNever:
	default:
		bad("--reset-on-start %q: want auto, always or never", c.ResetOnStart)
	}
	if strings.TrimSpace(c.ResetCmd) == "" {
		bad("--reset-cmd is empty")
	}
	if c.HangMarker == "" {
		bad("--hang-marker is empty")
	}
	if c.Chips != nil {
		if _, err := chips.Parse(chips.Format(c.Chips)); err != nil {
			bad("--chips: %v", err)
		}
	}
	return errors.Join(errs...)
}
