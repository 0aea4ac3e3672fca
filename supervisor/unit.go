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

	StartTimeout  time.Duration // the supervisor's --start-timeout
	StopGrace     time.Duration // the supervisor's --stop-grace
	RestartWindow time.Duration
	MaxRestarts   int
	Watchdog      time.Duration
	RestartSec    time.Duration
}

// unitView adds the derived settings the template prints.
type unitView struct {
	Unit
	TimeoutStart, TimeoutStop time.Duration
	StartLimitBurst           int
}

// Render writes the unit file text.
func (u Unit) Render() (string, error) {
	if u.Name == "" || strings.ContainsAny(u.Name, "/ \t\n") {
		return "", fmt.Errorf("unit name %q: want a non-empty name without blanks or slashes", u.Name)
	}
	if len(u.Exec) == 0 || !filepath.IsAbs(u.Exec[0]) {
		return "", fmt.Errorf("unit %s: ExecStart needs an absolute program path, got %q", u.Name, u.Exec)
	}
	for _, d := range []time.Duration{u.StartTimeout, u.StopGrace, u.RestartWindow, u.Watchdog, u.RestartSec} {
		if d <= 0 {
			return "", fmt.Errorf("unit %s: timeouts must be positive", u.Name)
		}
	}
	t, err := template.New("systemd.service.tmpl").Funcs(template.FuncMap{
		"seconds":  systemdSeconds,
		"execLine": execLine,
		"quote":    systemdQuote,
	}).ParseFS(templates.FS, "systemd.service.tmpl")
	if err != nil {
		return "", fmt.Errorf("parse the unit template: %w", err)
	}
	v := unitView{
		Unit: u,
		// A start may follow a stop of the previous server that hung.
		TimeoutStart:    u.StartTimeout + u.StopGrace + time.Minute,
		TimeoutStop:     u.StopGrace + 30*time.Second,
		StartLimitBurst: max(1, u.MaxRestarts),
	}
	if strings.ContainsAny(v.Description, "\n") {
		return "", fmt.Errorf("unit %s: the description must be one line", u.Name)
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
