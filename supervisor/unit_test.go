package supervisor

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/ttmodel/tt-model/internal/testing/testenv"
)

func testUnit(user bool) Unit {
	return Unit{
		Name:          "tt-model-pi05",
		Description:   "tt-model pi05 (profile default)",
		Exec:          []string{os.Args[0], "supervise", "--start-timeout", "7m0s", "--ready-line", "Uvicorn running on http://0.0.0.0:8000", "--", "tt-model-server", "--label", "50% $HOME"},
		User:          user,
		Environment:   map[string]string{"PATH": "/opt/my tools/bin:/usr/bin", "HF_HOME": "/srv/hf-100%"},
		APIKeyFile:    "/etc/tt-model/pi05.key",
		WritablePaths: []string{"/srv/hf-100%", "/var/cache/tt metal", "/run/lock"},
		Supervisor:    Defaults(8000),
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

// A system unit is sandboxed, its writable paths each on a ReadWritePaths=
// line that tolerates a path not there yet; the homes are hidden unless a
// writable path lies in one. A user unit is not sandboxed (a user manager
// cannot mount namespaces without user namespaces).
func TestUnitSandbox(t *testing.T) {
	for _, tc := range []struct {
		name     string
		user     bool
		writable []string
		want     []string
	}{
		{"system", false, nil, []string{
			"ProtectSystem=strict\nProtectHome=yes\nPrivateTmp=yes\nNoNewPrivileges=yes\n", "\nStateDirectory=tt-model-pi05\n",
			"ReadWritePaths=-/srv/hf-100%%\nReadWritePaths=-\"/var/cache/tt metal\"\nReadWritePaths=-/run/lock\n",
		}},
		{"cache in root's home", false, []string{"/root/.cache/huggingface"}, []string{"ProtectHome=read-only\n", "ReadWritePaths=-/root/.cache/huggingface\n"}},
		{"cache in a home", false, []string{"/home/ops/.cache/tt-metal"}, []string{"ProtectHome=read-only\n"}},
		{"not a home", false, []string{"/homestead/cache"}, []string{"ProtectHome=yes\n"}},
		{"run as", false, nil, []string{"User=tt-model\nGroup=tt-model\n", "\nSupplementaryGroups=tenstorrent video\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := testUnit(tc.user)
			if tc.writable != nil {
				u.WritablePaths = tc.writable
			}
			if tc.name == "run as" {
				u.RunAs, u.Group, u.SupplementaryGroups = "tt-model", "tt-model", []string{"tenstorrent", "video"}
			}
			text, err := u.Render()
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.want {
				if !strings.Contains(text, want) {
					t.Errorf("unit lacks %q:\n%s", want, text)
				}
			}
		})
	}
	text, err := testUnit(true).Render()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"User=", "Group=", "ProtectSystem=", "ProtectHome=", "PrivateTmp=", "NoNewPrivileges=", "StateDirectory=", "ReadWritePaths="} {
		if strings.Contains(text, key) {
			t.Errorf("a user unit has %s:\n%s", key, text)
		}
	}
}

func TestUnitRenderRejects(t *testing.T) {
	for name, u := range map[string]Unit{
		"relative exec":          func() Unit { u := testUnit(false); u.Exec[0] = "tt-model"; return u }(),
		"bad name":               func() Unit { u := testUnit(false); u.Name = "a/b"; return u }(),
		"no timeout":             func() Unit { u := testUnit(false); u.Supervisor.StopGrace = 0; return u }(),
		"no kill wait":           func() Unit { u := testUnit(false); u.Supervisor.KillTimeout = 0; return u }(),
		"relative key":           func() Unit { u := testUnit(false); u.APIKeyFile = "key"; return u }(),
		"blank in key":           func() Unit { u := testUnit(false); u.APIKeyFile = "/etc/my key"; return u }(),
		"line in key":            func() Unit { u := testUnit(false); u.APIKeyFile = "/etc/k\rExecStartPre=/bin/false"; return u }(),
		"user unit with User=":   func() Unit { u := testUnit(true); u.RunAs = "tt-model"; return u }(),
		"line in user":           func() Unit { u := testUnit(false); u.RunAs = "tt\nExecStartPre=/bin/false"; return u }(),
		"blank in group":         func() Unit { u := testUnit(false); u.SupplementaryGroups = []string{"a b"}; return u }(),
		"relative writable path": func() Unit { u := testUnit(false); u.WritablePaths = []string{"cache"}; return u }(),
		"line in writable path":  func() Unit { u := testUnit(false); u.WritablePaths = []string{"/c\nExecStartPre=/bin/false"}; return u }(),
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

// controlChars are every control character: C0, DEL and C1.
func controlChars() []rune {
	var out []rune
	for r := rune(1); r < 0x20; r++ {
		out = append(out, r)
	}
	out = append(out, 0x7f)
	for r := rune(0x80); r <= 0x9f; r++ {
		out = append(out, r)
	}
	return out
}

// unitWords reads a unit file value as systemd splits it into words (extract_first_word with
// EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE: blanks between words, double or single quotes, C escapes),
// then undoes the specifier escape %%: what ExecStart= and Environment= hand on.
func unitWords(t *testing.T, value string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord, quote := false, rune(0)
	rs := []rune(value)
	hex := func(i, n int) rune {
		v, err := strconv.ParseUint(string(rs[i:i+n]), 16, 32)
		if err != nil {
			t.Fatalf("bad escape in %q: %v", value, err)
		}
		return rune(v)
	}
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\\':
			i++
			inWord = true
			switch c := rs[i]; c {
			case 'n':
				w.WriteByte('\n')
			case 't':
				w.WriteByte('\t')
			case 'r':
				w.WriteByte('\r')
			case 'x':
				w.WriteRune(hex(i+1, 2))
				i += 2
			case 'u':
				w.WriteRune(hex(i+1, 4))
				i += 4
			case '\\', '"', '\'':
				w.WriteRune(c)
			default:
				t.Fatalf("escape \\%c in %q: the renderer writes none", c, value)
			}
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '"' || r == '\''):
			quote, inWord = r, true
		case quote == 0 && (r == ' ' || r == '\t'):
			if inWord {
				words = append(words, strings.ReplaceAll(w.String(), "%%", "%"))
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, strings.ReplaceAll(w.String(), "%%", "%"))
	}
	return words
}

// A control character in an ExecStart word (an argv word, a --default-env value) or an Environment
// value is escaped: the unit holds no control character but its line ends, has its one ExecStart
// line (a \r once started an injected ExecStartPre= line), systemd-analyze verify accepts it, and
// the words read back as systemd reads them are the values given. Where nothing unescapes (the
// description, the working directory, names) a control character is refused.
func TestUnitControlCharacters(t *testing.T) {
	var all strings.Builder
	for _, c := range controlChars() {
		all.WriteRune(c)
	}
	for _, c := range append(controlChars(), -1) {
		s := string(c)
		if c < 0 {
			s = all.String() // every one in one word
		}
		u := testUnit(false)
		u.APIKeyFile = "" // its Environment= line is the unit's own, not one of u.Environment
		u.Exec = append(u.Exec, "--default-env", "PI05_SLO_MS=1"+s+"ExecStartPre=/bin/false", "word"+s+"%$")
		u.Environment["TT_NOTE"] = "a" + s + "ExecStartPre=/bin/false \"q\" \\"
		text, err := u.Render()
		if err != nil {
			t.Fatalf("%U: %v", c, err)
		}
		if i := strings.IndexFunc(text, func(r rune) bool { return r != '\n' && unicode.IsControl(r) }); i >= 0 {
			t.Fatalf("%U: control character at byte %d of the unit:\n%q", c, i, text)
		}
		var exec []string
		env := map[string]string{}
		for _, line := range strings.Split(text, "\n") {
			key, value, _ := strings.Cut(line, "=")
			switch key {
			case "ExecStart":
				if exec != nil {
					t.Fatalf("%U: a second ExecStart line:\n%s", c, text)
				}
				exec = unitWords(t, value)
			case "Environment":
				words := unitWords(t, value)
				k, v, _ := strings.Cut(words[0], "=")
				env[k] = v
			case "ExecStartPre":
				t.Fatalf("%U: an injected line %q", c, line)
			}
		}
		// ExecStart hands on $$ as $ (systemd expands variables there, not in Environment=).
		for i := range exec {
			exec[i] = strings.ReplaceAll(exec[i], "$$", "$")
		}
		if !slices.Equal(exec, u.Exec) {
			t.Errorf("%U: ExecStart reads back as %q, want %q", c, exec, u.Exec)
		}
		if !maps.Equal(env, u.Environment) {
			t.Errorf("%U: Environment reads back as %q, want %q", c, env, u.Environment)
		}
		if c < 0 {
			verifyUnit(t, text)
		}
	}
	for name, u := range map[string]Unit{
		"description \\r": func() Unit { u := testUnit(false); u.Description = "pi05\rExecStartPre=/bin/false"; return u }(),
		"description \\n": func() Unit { u := testUnit(false); u.Description = "pi05\nx"; return u }(),
		"description C1":  func() Unit { u := testUnit(false); u.Description = "pi05\u0085x"; return u }(),
		"directory \\r":   func() Unit { u := testUnit(false); u.WorkingDirectory = "/srv\r/x"; return u }(),
		"name \\x01":      func() Unit { u := testUnit(false); u.Name = "tt\x01"; return u }(),
		"env name \\r":    func() Unit { u := testUnit(false); u.Environment["A\rB"] = "1"; return u }(),
		"NUL in a word":   func() Unit { u := testUnit(false); u.Exec = append(u.Exec, "a\x00b"); return u }(),
		"not UTF-8":       func() Unit { u := testUnit(false); u.Environment["X"] = "\xff"; return u }(),
	} {
		if text, err := u.Render(); err == nil {
			t.Errorf("%s: rendered:\n%s", name, text)
		}
	}
}

// verifyUnit runs systemd-analyze verify on a system unit's text.
func verifyUnit(t *testing.T, text string) {
	t.Helper()
	testenv.Require(t, "systemd-analyze")
	path := filepath.Join(t.TempDir(), "tt-model-pi05.service")
	mustWrite(t, path, text)
	out, err := exec.Command("systemd-analyze", "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s\nunit:\n%s", err, out, text)
	}
}
