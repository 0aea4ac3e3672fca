package runner

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// `serve --print` shows the exact command a start would run, without
// starting anything: the `docker run` equivalent of the container the Docker
// runner creates, or the host runner's environment and argv. The token is
// named, never printed (upstream passes `-e HF_TOKEN` by name too).

// RunCommand renders the `docker run` Start would amount to for spec. The
// image is named, not loaded; its entrypoint comes from the package's layout
// (or the engine, for a package without one).
func (d *Docker) RunCommand(ctx context.Context, spec *Spec) (string, error) {
	tag, entrypoint, err := d.imageFor(ctx, spec.Package)
	if err != nil {
		return "", err
	}
	cfg, host, err := d.containerConfig(ctx, spec, tag, entrypoint)
	if err != nil {
		return "", err
	}
	args := []string{"docker", "run", "--detach", "--name", spec.Name}
	if cfg.User != "" {
		args = append(args, "--user", cfg.User)
	}
	args = append(args, "--restart", string(host.RestartPolicy.Name))
	if host.IpcMode != "" {
		args = append(args, "--ipc", string(host.IpcMode))
	}
	for _, dev := range host.Devices {
		args = append(args, "--device", dev.PathOnHost+":"+dev.PathInContainer+":"+dev.CgroupPermissions)
	}
	for _, b := range host.Binds {
		args = append(args, "--volume", b)
	}
	var labels []string
	for k, v := range cfg.Labels {
		labels = append(labels, k+"="+v)
	}
	sort.Strings(labels)
	for _, l := range labels {
		args = append(args, "--label", l)
	}
	for port, bindings := range host.PortBindings {
		for _, b := range bindings {
			args = append(args, "--publish", b.HostPort+":"+port.Port())
		}
	}
	args = append(args, envFlags(cfg.Env)...)
	if len(cfg.Entrypoint) > 0 {
		args = append(args, "--entrypoint", cfg.Entrypoint[0], tag)
		args = append(args, cfg.Entrypoint[1:]...)
	} else {
		args = append(args, tag)
	}
	args = append(args, cfg.Cmd...)
	return shellJoin(args), nil
}

// imageFor names the image Start would run and reads its entrypoint.
func (d *Docker) imageFor(ctx context.Context, pkg *Package) (string, []string, error) {
	if dir := pkg.ImageLayout(); dir != "" {
		img, err := pkg.Image()
		if err != nil {
			return "", nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return "", nil, fmt.Errorf("image config of %s: %w", dir, err)
		}
		tag := pkg.Wire.Container.Image.Tag
		if tag == "" {
			dg, err := img.Digest()
			if err != nil {
				return "", nil, err
			}
			tag = fmt.Sprintf("tt-model/%s:%s", pkg.Wire.Name, dg.Hex[:12])
		}
		return tag, cf.Config.Entrypoint, nil
	}
	tag := pkg.Wire.Container.Image.Tag
	img, err := d.c.ImageInspect(ctx, tag)
	if err != nil {
		return "", nil, fmt.Errorf("%s: no image/ layout, and the engine has no %s: %w", pkg.Path, tag, err)
	}
	if img.Config == nil {
		return tag, nil, nil
	}
	return tag, img.Config.Entrypoint, nil
}

// Command renders what the host runner would start for spec: the server's
// environment (beyond the caller's) and the supervisor's argv.
func (h *Host) Command(spec *Spec) string {
	var lines []string
	for _, kv := range SortedEnv(hostEnv(spec)) {
		if strings.HasPrefix(kv, "HF_TOKEN=") {
			continue // inherited from the caller's environment, never printed
		}
		lines = append(lines, shellQuote(kv))
	}
	return "env " + strings.Join(lines, " ") + " " + shellJoin(h.argv(spec, h.serverArgv(spec)))
}

// envFlags renders --env flags; HF_TOKEN by name only (docker takes the
// value from the caller's environment).
func envFlags(env []string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "HF_TOKEN=") {
			kv = "HF_TOKEN"
		}
		out = append(out, "--env", kv)
	}
	return out
}

// shellJoin writes args as one POSIX shell command line, each word quoted
// when it needs it (systemd's ExecStart quotes by its own rules).
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@,+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
