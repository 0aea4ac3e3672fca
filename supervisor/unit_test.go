package supervisor

import (
	"github.com/ttmodel/tt-model/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testUnit(user bool) Unit {
	return Unit{
		Name:          "tt-model-pi05",
		Description:   "tt-model pi05 (profile default)",
		Exec:          []string{os.Args[0], "supervise", "--start-timeout", "7m0s", "--ready-line", "Uvicorn running on http://0.0.0.0:8000", "--", "tt-model-server", "--label", "50% $HOME"},
		User:          user,
		Environment:   map[string]string{"PATH": "/opt/my tools/bin:/usr/bin", "HF_HOME": "/srv/hf-100%"},
		StartTimeout:  7 * time.Minute,
		StopGrace:     120 * time.Second,
		ResetBudget:   12 * time.Minute,
		RestartWindow: 30 * time.Minute,
		MaxRestarts:   5,
		Watchdog:      60 * time.Second,
		RestartSec:    5 * time.Second,
	}
}

func TestUnitRender(t *testing.T) {
	for _, user := range []bool{false, true} {
		text, err := testUnit(user).Render()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"Type=notify\n", "NotifyAccess=main\n", "TimeoutStartSec=1320s\n", "TimeoutStopSec=150s\n",
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
		"no timeout":    func() Unit { u := testUnit(false); u.StopGrace = 0; return u }(),
	} {
		if _, err := u.Render(); err == nil {
			t.Errorf("%s: Render accepted %+v", name, u)
		}
	}
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
