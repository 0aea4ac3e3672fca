package supervisor

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kardianos/service"
)

// Service installs, removes and queries the unit through kardianos/service,
// with our own unit text in place of its built-in systemd template (no
// Type=notify there, RestartSec=120 hard-coded, no timeouts).
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

// Uninstall stops (kardianos does not), disables and deletes the unit.
func (s *Service) Uninstall() error {
	if st, err := s.svc.Status(); err == nil && st == service.StatusRunning {
		if err := s.svc.Stop(); err != nil {
			return fmt.Errorf("stop %s.service: %w", s.unit.Name, err)
		}
	}
	if err := s.svc.Uninstall(); err != nil {
		return fmt.Errorf("uninstall %s.service: %w", s.unit.Name, err)
	}
	return nil
}

// Status is "running", "stopped" or "not installed".
func (s *Service) Status() (string, error) {
	st, err := s.svc.Status()
	switch {
	case errors.Is(err, service.ErrNotInstalled):
		return "not installed", nil
	case err != nil:
		return "", fmt.Errorf("status of %s.service: %w", s.unit.Name, err)
	case st == service.StatusRunning:
		return "running", nil
	case st == service.StatusStopped:
		return "stopped", nil
	}
	return "unknown", nil
}
