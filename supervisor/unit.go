package supervisor

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ttmodel/tt-model/templates"
)

// Unit is the systemd service that runs `tt-model supervise`; Render turns
// it into a unit file from templates/systemd.service.tmpl.
type Unit struct {
	Name             string // without ".service"
	Description      string
	Exec             []string // ExecStart: an absolute tt-model path, "supervise", flags, server
	User             bool     // a user unit (default.target) instead of a system one
	WorkingDirectory string
	// Environment is set for the supervisor and, through it, the server and
	// the reset command: what they need from the installer's environment,
	// which systemd does not pass on (see templates/systemd.service.tmpl).
	Environment map[string]string
	// APIKeyFile is an absolute file holding the model server's API key
	// ("" none): a system unit loads it as a credential (LoadCredential=),
	// a user unit names the file; either way the server reads the file
	// TT_API_KEY_FILE names, and the key is in no argv or environment.
	APIKeyFile string
	// WritablePaths are what a system unit's sandbox (ProtectSystem=strict)
	// leaves writable besides its StateDirectory: the caches, the hang
	// marker's folder, the chip lock folder. A user unit is not sandboxed.
	WritablePaths []string
	// RunAs and Group are a system unit's User= and Group= ("": root, and
	// Group= the user's own); SupplementaryGroups are its other groups (the
	// one that owns /dev/tenstorrent).
	RunAs, Group        string
	SupplementaryGroups []string

	// Supervisor is the configuration ExecStart's flags give the
	// supervisor: systemd's timeouts and start limit are derived from it,
	// so the two cannot disagree.
	Supervisor Config
	Watchdog   time.Duration
	RestartSec time.Duration
}

// StopMargin is what TimeoutStopSec adds to the supervisor's longest stop
// (Config.StopBudget): its own exit after the server is gone, on a loaded
// host. systemd's SIGKILL then only ever ends a supervisor that is itself
// stuck.
const StopMargin = 30 * time.Second

// unitView adds the derived settings the template prints.
type unitView struct {
	Unit
	TimeoutStart, TimeoutStop time.Duration
	RestartWindow             time.Duration
	StartLimitBurst           int
	EnvironmentLines          []string // NAME=value, sorted by name
	ProtectHome               string   // "yes", or "read-only" when a writable path is in a home
}

// Render writes the unit file text.
func (u Unit) Render() (string, error) {
	if u.Name == "" || strings.ContainsAny(u.Name, "/ \t") || controlAt(u.Name) >= 0 {
		return "", fmt.Errorf("unit name %q: want a non-empty name without blanks, slashes or control characters", u.Name)
	}
	if len(u.Exec) == 0 || !filepath.IsAbs(u.Exec[0]) {
		return "", fmt.Errorf("unit %s: ExecStart needs an absolute program path, got %q", u.Name, u.Exec)
	}
	c := u.Supervisor
	for _, d := range []time.Duration{c.StartTimeout, c.StopGrace, c.KillTimeout, c.ResetBudget(), c.RestartWindow, u.Watchdog, u.RestartSec} {
		if d <= 0 {
			return "", fmt.Errorf("unit %s: timeouts must be positive", u.Name)
		}
	}
	t, err := template.New("systemd.service.tmpl").Funcs(template.FuncMap{
		"seconds":  systemdSeconds,
		"execLine": execLine,
		"quote":    systemdQuote,
		"env":      environmentLine,
		"path":     readWritePath,
		"join":     strings.Join,
	}).ParseFS(templates.FS, "systemd.service.tmpl")
	if err != nil {
		return "", fmt.Errorf("parse the unit template: %w", err)
	}
	v := unitView{
		Unit: u,
		// A whole first start, a reset before it and the stop of a server
		// that hung included, fits without EXTEND_TIMEOUT_USEC: a
		// `systemctl daemon-reload` mid-start makes systemd forget the
		// extensions it granted and measure from TimeoutStartSec again.
		TimeoutStart:    c.ResetBudget() + c.StartTimeout + c.StopBudget() + time.Minute,
		TimeoutStop:     c.StopBudget() + StopMargin,
		RestartWindow:   c.RestartWindow,
		StartLimitBurst: max(1, c.MaxRestarts),
	}
	// systemd ends a unit file line at \n, \r or NUL: a control character where nothing unescapes
	// it (the description, a directory, a variable's name) would start a line of its own, so it
	// is refused; in ExecStart words and Environment values it is escaped (quote, env).
	if i := controlAt(v.Description); i >= 0 {
		return "", fmt.Errorf("unit %s: description %q: control character at byte %d: want one line of printable text", u.Name, v.Description, i)
	}
	if i := controlAt(u.WorkingDirectory); i >= 0 {
		return "", fmt.Errorf("unit %s: working directory %q: control character at byte %d", u.Name, u.WorkingDirectory, i)
	}
	for i, a := range u.Exec {
		if err := escapable(a); err != nil {
			return "", fmt.Errorf("unit %s: ExecStart word %d %q: %w", u.Name, i, a, err)
		}
	}
	for k, val := range u.Environment {
		if k == "" || strings.ContainsAny(k, "= \t") || controlAt(k) >= 0 {
			return "", fmt.Errorf("unit %s: environment name %q: want a name without blanks, '=' or control characters", u.Name, k)
		}
		if err := escapable(val); err != nil {
			return "", fmt.Errorf("unit %s: environment %s=%q: %w", u.Name, k, val, err)
		}
	}
	if u.APIKeyFile != "" && (!filepath.IsAbs(u.APIKeyFile) || strings.ContainsAny(u.APIKeyFile, " \"'\\%") || controlAt(u.APIKeyFile) >= 0 || !utf8.ValidString(u.APIKeyFile)) {
		return "", fmt.Errorf("unit %s: API key file %q: want an absolute UTF-8 path without blanks, quotes, backslashes, %% or control characters", u.Name, u.APIKeyFile)
	}
	if u.User && (u.RunAs != "" || u.Group != "" || len(u.SupplementaryGroups) > 0) {
		return "", fmt.Errorf("unit %s: a user unit runs as its user: User=, Group= and SupplementaryGroups= are a system unit's", u.Name)
	}
	for _, n := range append([]string{u.RunAs, u.Group}, u.SupplementaryGroups...) {
		if n != "" && !accountName.MatchString(n) {
			return "", fmt.Errorf("unit %s: user or group %q: want a name of letters, digits, '_', '-' and '.', not starting with a digit or '-'", u.Name, n)
		}
	}
	v.ProtectHome = "yes"
	for _, p := range u.WritablePaths {
		if !filepath.IsAbs(p) || controlAt(p) >= 0 || !utf8.ValidString(p) {
			return "", fmt.Errorf("unit %s: writable path %q: want an absolute UTF-8 path without control characters", u.Name, p)
		}
		// ProtectHome=yes hides these: a writable path under one needs them
		// readable (read-only), which ReadWritePaths= then opens for writing.
		for _, h := range []string{"/home", "/root", "/run/user"} {
			if p == h || strings.HasPrefix(p, h+"/") {
				v.ProtectHome = "read-only"
			}
		}
	}
	v.EnvironmentLines = make([]string, 0, len(u.Environment))
	for _, k := range sortedKeys(u.Environment) {
		v.EnvironmentLines = append(v.EnvironmentLines, k+"="+u.Environment[k])
	}
	var b bytes.Buffer
	if err := t.Execute(&b, v); err != nil {
		return "", fmt.Errorf("render unit %s: %w", u.Name, err)
	}
	return b.String(), nil
}

// accountName is a user or group name systemd takes in User=, Group= and
// SupplementaryGroups= as is (its valid_user_group_name, relaxed mode).
var accountName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)

// systemdSeconds writes d as whole seconds ("420s"), rounding up.
func systemdSeconds(d time.Duration) string {
	return fmt.Sprintf("%ds", int64(math.Ceil(d.Seconds())))
}

// execLine quotes each word of an ExecStart= line the way systemd splits it (double quotes with C
// escapes, "$$" for a literal "$", "%%" for a literal "%"), which is not how a shell does.
func execLine(argv []string) string {
	words := make([]string, len(argv))
	for i, a := range argv {
		words[i] = systemdQuote(a)
	}
	return strings.Join(words, " ")
}

// systemdQuote makes s one word of a unit file command line: specifiers
// (%) and variable expansion ($) escaped, and double quotes with C-style
// escapes (cEscape) when the word holds blanks, quotes, backslashes or
// control characters, or is empty.
func systemdQuote(s string) string {
	s = strings.ReplaceAll(s, "%", "%%")
	s = strings.ReplaceAll(s, "$", "$$")
	if s != "" && !strings.ContainsAny(s, " \t\"'\\;") && controlAt(s) < 0 {
		return s
	}
	return `"` + cEscape(s) + `"`
}

// environmentLine is one Environment= assignment. systemd expands
// specifiers (%) there but not variables, so only % is doubled; the whole
// assignment is quoted, with C-style escapes, when it holds blanks, quotes,
// backslashes or control characters.
func environmentLine(assignment string) string {
	s := strings.ReplaceAll(assignment, "%", "%%")
	if !strings.ContainsAny(s, " \t\"'\\") && controlAt(s) < 0 {
		return s
	}
	return `"` + cEscape(s) + `"`
}

// readWritePath is one ReadWritePaths= entry: "-" so that a path that does
// not exist yet (a cache before its first pull) does not fail the start,
// then the path quoted as environmentLine quotes an assignment (systemd
// unquotes and expands specifiers there too).
func readWritePath(p string) string {
	return "-" + environmentLine(p)
}

// cEscape writes s for the inside of a double-quoted word, in the escapes
// systemd's word splitting undoes (cunescape): backslash and quote escaped,
// every control character as \n, \t, \r or \xNN (C0 and DEL) or \uNNNN
// (C1), so the line holds none and systemd reads back s itself.
func cEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\' || r == '"':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// controlAt is the byte offset of s's first control character (C0, DEL,
// C1), or -1.
func controlAt(s string) int {
	return strings.IndexFunc(s, unicode.IsControl)
}

// escapable says whether cEscape can carry s: systemd unescapes no NUL,
// and a byte that is not UTF-8 has no escape it reads back as itself.
func escapable(s string) error {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return fmt.Errorf("a NUL byte at %d", i)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("not UTF-8")
	}
	return nil
}
