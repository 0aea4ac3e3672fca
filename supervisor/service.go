package supervisor

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/kardianos/service"
)

// Service installs and removes the unit through kardianos/service, with our
// own unit text in place of its built-in systemd template (no Type=notify
// there, RestartSec=120 hard-coded, no timeouts), and asks systemctl for
// its state.
type Service struct {
	unit Unit
	svc  service.Service
}

// noProgram satisfies service.Interface: kardianos only runs it from
// service.Run, which we never call (the unit runs `tt-model supervise`).
type noProgram struct{}

func (noProgram) Start(service.Service) error { return nil }
func (noProgram) Stop(service.Service) error  { return nil }

// NewService prepares u for installation. It refuses a host whose service
// manager is not systemd: the unit, readiness and watchdog are systemd's.
func NewService(u Unit) (*Service, error) {
	text, err := u.Render()
	if err != nil {
		return nil, err
	}
	// kardianos renders SystemdScript with its own small template engine;
	// text without "{{" passes through it unchanged.
	if strings.Contains(text, "{{") {
		return nil, fmt.Errorf("unit %s: the command line may not contain \"{{\"", u.Name)
	}
	cfg := &service.Config{
		Name:        u.Name,
		Description: u.Description,
		Executable:  u.Exec[0],
		Arguments:   u.Exec[1:],
		Option: service.KeyValue{
			"SystemdScript": text,
			"UserService":   u.User,
		},
	}
	svc, err := service.New(noProgram{}, cfg)
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", u.Name, err)
	}
	if p := svc.Platform(); p != "linux-systemd" {
		return nil, fmt.Errorf("service %s: this host's service manager is %q; tt-model service needs systemd", u.Name, p)
	}
	return &Service{unit: u, svc: svc}, nil
}

// Install writes the unit, enables it and reloads systemd.
func (s *Service) Install() error {
	if err := s.svc.Install(); err != nil {
		return fmt.Errorf("install %s.service: %w", s.unit.Name, err)
	}
	return nil
}

// Uninstall stops the unit when it runs (kardianos does not), then
// disables and deletes it, and clears a failed state systemd would keep
// listing for a unit that no longer exists.
func (s *Service) Uninstall(ctx context.Context) error {
	st, err := s.State(ctx)
	if err != nil {
		return err
	}
	if !st.Installed() {
		return fmt.Errorf("%s.service is not installed", s.unit.Name)
	}
	if st.ActiveState != "inactive" && st.ActiveState != "failed" {
		if _, err := s.systemctl(ctx, "stop", s.unit.Name+".service"); err != nil {
			return err
		}
	}
	if err := s.svc.Uninstall(); err != nil {
		return fmt.Errorf("uninstall %s.service: %w", s.unit.Name, err)
	}
	// Fails when there is nothing to reset; either way the unit is gone.
	_, _ = s.systemctl(ctx, "reset-failed", s.unit.Name+".service")
	return nil
}

// UnitState is systemd's view of the unit (`systemctl show`).
type UnitState struct {
	LoadState   string // "not-found" when no unit file exists
	ActiveState string // active, activating, deactivating, reloading, inactive, failed
	SubState    string // running, start, stop-sigterm, auto-restart, dead, …
	Result      string // success, exit-code, timeout, watchdog, start-limit-hit, …
	StatusText  string // the supervisor's last STATUS=
	NRestarts   int    // restarts systemd made (Restart=), not the supervisor's
}

// Installed reports whether systemd finds a unit file.
func (st UnitState) Installed() bool { return st.LoadState != "not-found" }

// String reads like `systemctl status`: "active (running); ready: server
// ready (start 1)", with the result of a failure and systemd's restarts.
func (st UnitState) String() string {
	if !st.Installed() {
		return "not installed"
	}
	out := fmt.Sprintf("%s (%s)", st.ActiveState, st.SubState)
	if st.Result != "" && st.Result != "success" {
		out += ", result " + st.Result
	}
	if st.StatusText != "" {
		out += "; " + st.StatusText
	}
	if st.NRestarts > 0 {
		out += fmt.Sprintf("; systemd restarted it %d times", st.NRestarts)
	}
	return out
}

// State asks systemd for the unit's state. kardianos' Status is not used:
// it calls a unit that is deactivating or reloading "not installed", and an
// activating one "running".
func (s *Service) State(ctx context.Context) (UnitState, error) {
	props := []string{"LoadState", "ActiveState", "SubState", "Result", "StatusText", "NRestarts"}
	args := []string{"show", s.unit.Name + ".service"}
	for _, p := range props {
		args = append(args, "--property="+p)
	}
	out, err := s.systemctl(ctx, args...)
	if err != nil {
		return UnitState{}, err
	}
	v := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, val, ok := strings.Cut(line, "="); ok {
			v[k] = val
		}
	}
	st := UnitState{LoadState: v["LoadState"], ActiveState: v["ActiveState"], SubState: v["SubState"],
		Result: v["Result"], StatusText: v["StatusText"]}
	if st.LoadState == "" || st.ActiveState == "" {
		return UnitState{}, fmt.Errorf("systemctl show %s.service: no LoadState/ActiveState in %q", s.unit.Name, out)
	}
	if n := v["NRestarts"]; n != "" {
		if st.NRestarts, err = strconv.Atoi(n); err != nil {
			return UnitState{}, fmt.Errorf("systemctl show %s.service: NRestarts=%q", s.unit.Name, n)
		}
	}
	return st, nil
}

// systemctl runs systemctl (--user for a user unit) and returns its output.
func (s *Service) systemctl(ctx context.Context, args ...string) (string, error) {
	if s.unit.User {
		args = append([]string{"--user"}, args...)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "systemctl", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("systemctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
