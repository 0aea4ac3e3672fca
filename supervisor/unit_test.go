package supervisor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/testenv"
)

func testUnit(user bool) Unit {
	return Unit{
		Name:        "tt-model-pi05",
		Description: "tt-model pi05 (profile default)",
		Exec:        []string{os.Args[0], "supervise", "--start-timeout", "7m0s", "--ready-line", "Uvicorn running on http://0.0.0.0:8000", "--", "tt-model-server", "--label", "50% $HOME"},
		User:        user,
		Environment: map[string]string{"PATH": "/opt/my tools/bin:/usr/bin", "HF_HOME": "/srv/hf-100%"},
		APIKeyFile:  "/etc/tt-model/pi05.key",
		Supervisor:  Defaults(8000),
		Watchdog:    60 * time.Second,
		RestartSec:  5 * time.Second,
	}
}

func TestUnitRender(t *testing.T) {
	for _, user := range []bool{false, true} {
		text, err := testUnit(user).Render()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"Type=notify\n", "NotifyAccess=main\n", "TimeoutStartSec=1440s\n", "TimeoutStopSec=180s\n",
			"WatchdogSec=60s\n", "Restart=on-failure\n", "RestartSec=5s\n", "KillMode=mixed\n",
			"StartLimitIntervalSec=1800s\nStartLimitBurst=5\n", "RestartPreventExitStatus=2 126 127\n",
			"Environment=HF_HOME=/srv/hf-100%%\nEnvironment=\"PATH=/opt/my tools/bin:/usr/bin\"\n",
			`"--ready-line" "Uvicorn running on http://0.0.0.0:8000" -- tt-model-server --label "50%% $$HOME"`,
		} {
			want = strings.Replace(want, `"--ready-line"`, "--ready-line", 1)
			if !strings.Contains(text, want) {
				t.Errorf("user=%v: unit lacks %q:\n%s", user, want, text)
			}
		}
		// StartLimit* belong in [Unit], not [Service].
		unitSection := text[:strings.Index(text, "[Service]")]
		if !strings.Contains(unitSection, "StartLimitBurst=") {
			t.Errorf("StartLimitBurst is not in [Unit]:\n%s", text)
		}
		// The API key: a system unit's credential, a user unit's file; never the key's bytes.
		wantKey := map[bool]string{
			false: "LoadCredential=tt-api-key:/etc/tt-model/pi05.key\nEnvironment=TT_API_KEY_FILE=%d/tt-api-key\n",
			true:  "Environment=TT_API_KEY_FILE=/etc/tt-model/pi05.key\n",
		}[user]
		if !strings.Contains(text, wantKey) || (user && strings.Contains(text, "LoadCredential")) {
			t.Errorf("user=%v: unit lacks %q:\n%s", user, wantKey, text)
		}
		wantTarget := map[bool]string{false: "WantedBy=multi-user.target", true: "WantedBy=default.target"}[user]
		if !strings.Contains(text, wantTarget) {
			t.Errorf("user=%v: unit lacks %s", user, wantTarget)
		}
	}
}

func TestUnitRenderRejects(t *testing.T) {
	for name, u := range map[string]Unit{
		"relative exec": func() Unit { u := testUnit(false); u.Exec[0] = "tt-model"; return u }(),
		"bad name":      func() Unit { u := testUnit(false); u.Name = "a/b"; return u }(),
		"no timeout":    func() Unit { u := testUnit(false); u.Supervisor.StopGrace = 0; return u }(),
		"no kill wait":  func() Unit { u := testUnit(false); u.Supervisor.KillTimeout = 0; return u }(),
		"relative key":  func() Unit { u := testUnit(false); u.APIKeyFile = "key"; return u }(),
		"blank in key":  func() Unit { u := testUnit(false); u.APIKeyFile = "/etc/my key"; return u }(),
	} {
		if _, err := u.Render(); err == nil {
			t.Errorf("%s: Render accepted %+v", name, u)
		}
	}
}

// TimeoutStopSec and TimeoutStartSec follow from the supervisor's settings:
// TimeoutStopSec outlasts its longest stop (the stop grace, then up to the
// kill timeout for the reap) by StopMargin, whatever the settings, so
// systemd's own SIGKILL never cuts a stop the supervisor is still bounding.
func TestUnitTimeoutsFollowSettings(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		stopGrace, killTimeout time.Duration
		startTimeout           time.Duration
		wantStop, wantStart    string
	}{
		{"defaults", 2 * time.Minute, 30 * time.Second, 7 * time.Minute, "180s", "1440s"},
		{"short grace", 4 * time.Second, 30 * time.Second, 7 * time.Minute, "64s", "1324s"},
		{"long grace", 10 * time.Minute, 30 * time.Second, 7 * time.Minute, "660s", "1920s"},
		{"long kill wait", 2 * time.Minute, 5 * time.Minute, time.Minute, "450s", "2160s"},
		{"fractions round up", 1500 * time.Millisecond, 100 * time.Millisecond, 7 * time.Minute, "32s", "1202s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := testUnit(false)
			u.Supervisor.StopGrace, u.Supervisor.KillTimeout, u.Supervisor.StartTimeout = tc.stopGrace, tc.killTimeout, tc.startTimeout
			text, err := u.Render()
			if err != nil {
				t.Fatal(err)
			}
			stop, start := unitSeconds(t, text, "TimeoutStopSec"), unitSeconds(t, text, "TimeoutStartSec")
			if got := fmt.Sprintf("%ds", int(stop.Seconds())); got != tc.wantStop {
				t.Errorf("TimeoutStopSec=%s, want %s", got, tc.wantStop)
			}
			if got := fmt.Sprintf("%ds", int(start.Seconds())); got != tc.wantStart {
				t.Errorf("TimeoutStartSec=%s, want %s", got, tc.wantStart)
			}
			c := u.Supervisor
			if stop < c.StopGrace+c.KillTimeout+StopMargin {
				t.Errorf("TimeoutStopSec=%s does not outlast the stop grace %s + kill timeout %s + margin %s", stop, c.StopGrace, c.KillTimeout, StopMargin)
			}
			if start < c.ResetBudget()+c.StartTimeout+c.StopBudget() {
				t.Errorf("TimeoutStartSec=%s does not hold a reset %s, a start %s and a stop %s", start, c.ResetBudget(), c.StartTimeout, c.StopBudget())
			}
		})
	}
}

// unitSeconds reads KEY=Ns from a rendered unit.
func unitSeconds(t *testing.T, text, key string) time.Duration {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + key + `=(\d+)s$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no %s=Ns line in:\n%s", key, text)
	}
	d, err := time.ParseDuration(m[1] + "s")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// systemd-analyze verify accepts the rendered unit, system and user.
func TestUnitVerifies(t *testing.T) {
	testenv.Require(t, "systemd-analyze")
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []bool{false, true} {
		text, err := testUnit(user).Render()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "tt-model-pi05.service")
		mustWrite(t, path, text)
		args := []string{"verify", "--man=no"}
		if user {
			args = append(args, "--user")
		}
		cmd := exec.Command(analyze, append(args, path)...)
		// A user manager needs a runtime dir; a fresh one stands in for a login session.
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) != 0 {
			t.Errorf("user=%v: systemd-analyze verify: %v\n%s\nunit:\n%s", user, err, out, text)
		}
	}
}

func TestSystemdQuote(t *testing.T) {
	for in, want := range map[string]string{
		"plain":      "plain",
		"":           `""`,
		"a b":        `"a b"`,
		`say "hi"`:   `"say \"hi\""`,
		"100%":       "100%%",
		"$HOME":      "$$HOME",
		`back\slash`: `"back\\slash"`,
	} {
		if got := systemdQuote(in); got != want {
			t.Errorf("systemdQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
