package supervisor

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"text/template"
	"time"

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
}

// Render writes the unit file text.
func (u Unit) Render() (string, error) {
	if u.Name == "" || strings.ContainsAny(u.Name, "/ \t\n") {
		return "", fmt.Errorf("unit name %q: want a non-empty name without blanks or slashes", u.Name)
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
	if strings.ContainsAny(v.Description, "\n") {
		return "", fmt.Errorf("unit %s: the description must be one line", u.Name)
	}
	for k, val := range u.Environment {
		if k == "" || strings.ContainsAny(k, "= \t\n") || strings.ContainsAny(val, "\n") {
			return "", fmt.Errorf("unit %s: environment %q=%q: want a name without blanks or '=' and a one-line value", u.Name, k, val)
		}
	}
	if u.APIKeyFile != "" && (!filepath.IsAbs(u.APIKeyFile) || strings.ContainsAny(u.APIKeyFile, " \t\n\"'\\%")) {
		return "", fmt.Errorf("unit %s: API key file %q: want an absolute path without blanks, quotes, backslashes or %%", u.Name, u.APIKeyFile)
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

// systemdSeconds writes d as whole seconds ("420s"), rounding up.
func systemdSeconds(d time.Duration) string {
	return fmt.Sprintf("%ds", int64(math.Ceil(d.Seconds())))
}

// execLine quotes each word of an ExecStart= line.
//
// Deliberate twin of shellJoin in runner/print.go: shell words and systemd ExecStart words quote
// differently.
func execLine(argv []string) string {
	words := make([]string, len(argv))
	for i, a := range argv {
		words[i] = systemdQuote(a)
	}
	return strings.Join(words, " ")
}

// systemdQuote makes s one word of a unit file command line: specifiers
// (%) and variable expansion ($) escaped, and double quotes with C-style
// escapes when the word holds blanks, quotes, backslashes or is empty.
func systemdQuote(s string) string {
	s = strings.ReplaceAll(s, "%", "%%")
	s = strings.ReplaceAll(s, "$", "$$")
	if s != "" && !strings.ContainsAny(s, " \t\n\"'\\;") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

// environmentLine is one Environment= assignment. systemd expands
// specifiers (%) there but not variables, so only % is doubled; the whole
// assignment is quoted when it holds blanks, quotes or backslashes.
func environmentLine(assignment string) string {
	s := strings.ReplaceAll(assignment, "%", "%%")
	if !strings.ContainsAny(s, " \t\"'\\") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}
