package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/internal/chips"
	"github.com/ttmodel/tt-model/internal/engine"
	"github.com/ttmodel/tt-model/manifest"
)

// ContainerHF is where the host's HF_HOME is mounted inside a container, as
// upstream's serve.
const ContainerHF = "/hf"

// Mount points inside the container, as upstream's serve.
const (
	containerMetalCache  = "/cache"
	containerWeightCache = "/weight-cache"
	// containerAPIKey is where the server's API key file is mounted, read-only.
	containerAPIKey = "/run/secrets/tt-api-key"
	hugepagesDir    = "/dev/hugepages-1G"
	// resetTimeout caps the chip reset after a forced kill, as upstream.
	resetTimeout = 180 * time.Second
)

// Docker runs each instance as a container on a Docker engine.
type Docker struct {
	c *client.Client
}

// ConnectDocker returns the engine DOCKER_HOST names (or the default
// socket), or an error when none answers within a few seconds.
func ConnectDocker(ctx context.Context) (*Docker, error) {
	c, err := engine.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &Docker{c: c}, nil
}

func (d *Docker) Kind() string { return "docker" }
func (d *Docker) Close() error { return d.c.Close() }

// Find inspects the container of that name.
func (d *Docker) Find(ctx context.Context, name string) (*Instance, error) {
	res, err := d.c.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: %w", name, err)
	}
	c := res.Container
	if c.Config == nil || c.Config.Labels[LabelName] == "" {
		return nil, nil // a container that is not ours
	}
	inst := instanceFromLabels(strings.TrimPrefix(c.Name, "/"), c.ID, c.Config.Labels)
	inst.Restarts = c.RestartCount
	if c.HostConfig != nil {
		for _, b := range c.HostConfig.PortBindings {
			for _, hb := range b {
				if hb.HostIP.IsValid() && !hb.HostIP.IsUnspecified() {
					inst.Bind = hb.HostIP.String()
				}
			}
		}
	}
	if c.State != nil {
		inst.State = string(c.State.Status)
		inst.Running = c.State.Running || c.State.Restarting
		inst.ExitCode = c.State.ExitCode
		inst.Started, _ = time.Parse(time.RFC3339Nano, c.State.StartedAt)
	}
	if !inst.Running {
		inst.PortHolders = portHolders(inst.Port)
	}
	return inst, nil
}

// List returns every container labelled as ours.
func (d *Docker) List(ctx context.Context) ([]Instance, error) {
	res, err := d.c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", LabelName)})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var out []Instance
	for _, s := range res.Items {
		if len(s.Names) == 0 {
			continue
		}
		inst, err := d.Find(ctx, strings.TrimPrefix(s.Names[0], "/"))
		if err != nil {
			return nil, err
		}
		if inst != nil {
			out = append(out, *inst)
		}
	}
	return out, nil
}

func instanceFromLabels(name, id string, labels map[string]string) *Instance {
	port, _ := strconv.Atoi(labels[LabelPort])
	return &Instance{
		Name: name, ID: id, Runner: "docker",
		Package: labels[LabelName], Profile: labels[LabelProfile],
		Chips: parseChips(labels[LabelDevices]), Port: port,
	}
}

// Start loads the image when needed, then creates and starts the container.
func (d *Docker) Start(ctx context.Context, spec *Spec, progress io.Writer) (*Instance, error) {
	if cur, err := d.Find(ctx, spec.Name); err != nil {
		return nil, err
	} else if cur != nil && cur.Running {
		return nil, &RunningError{Instance: cur}
	} else if cur != nil {
		// A stopped container of the same name would block the create.
		if _, err := d.c.ContainerRemove(ctx, cur.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			return nil, fmt.Errorf("remove the stopped %s: %w", spec.Name, err)
		}
	}
	tag, err := d.ensureImage(ctx, spec.Package, progress)
	if err != nil {
		return nil, err
	}
	img, err := d.c.ImageInspect(ctx, tag)
	if err != nil {
		return nil, fmt.Errorf("inspect image %s: %w", tag, err)
	}
	var entrypoint []string
	if img.Config != nil {
		entrypoint = img.Config.Entrypoint
	}
	cfg, host, err := d.containerConfig(ctx, spec, tag, entrypoint)
	if err != nil {
		return nil, err
	}
	created, err := d.c.ContainerCreate(ctx, client.ContainerCreateOptions{Name: spec.Name, Config: cfg, HostConfig: host})
	if cerrdefs.IsConflict(err) {
		// Another tt-model created it between our check and our create.
		if cur, ferr := d.Find(ctx, spec.Name); ferr == nil && cur != nil {
			return nil, &RunningError{Instance: cur}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create container %s: %w", spec.Name, err)
	}
	for _, w := range created.Warnings {
		fmt.Fprintf(progress, "docker: %s\n", w)
	}
	if _, err := d.c.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		_, _ = d.c.ContainerRemove(context.WithoutCancel(ctx), created.ID, client.ContainerRemoveOptions{Force: true})
		return nil, fmt.Errorf("start container %s: %w", spec.Name, err)
	}
	inst, err := d.Find(ctx, spec.Name)
	if err != nil {
		return nil, err
	}
	if inst == nil {
		return nil, fmt.Errorf("container %s vanished right after it started (was it removed?)", spec.Name)
	}
	return inst, nil
}

// containerConfig is upstream's docker run: one --device per chip, --ipc
// host and the hugepages mount when the host has them, the HF cache at /hf,
// the kernel and weight caches, labels, the port published as itself,
// restart on failure, and the server env sorted.
func (d *Docker) containerConfig(ctx context.Context, spec *Spec, tag string, entrypoint []string) (*container.Config, *container.HostConfig, error) {
	metal := filepath.Join(spec.StateDir, "cache")
	weights := filepath.Join(spec.StateDir, "weights")
	for _, dir := range []string{spec.HF.HFHome, spec.HF.CacheDir, metal, weights} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("create %s: %w", dir, err)
		}
	}
	port, err := network.ParsePort(strconv.Itoa(spec.Port) + "/tcp")
	if err != nil {
		return nil, nil, err
	}
	binds := []string{spec.HF.HFHome + ":" + ContainerHF}
	if spec.HF.CacheDir != filepath.Join(spec.HF.HFHome, "hub") {
		// HF_HUB_CACHE lives elsewhere: show it where HF_HOME=/hf expects it.
		binds = append(binds, spec.HF.CacheDir+":"+ContainerHF+"/hub")
	}
	binds = append(binds, metal+":"+containerMetalCache, weights+":"+containerWeightCache)
	if spec.APIKeyFile != "" {
		binds = append(binds, spec.APIKeyFile+":"+containerAPIKey+":ro")
	}
	host := &container.HostConfig{
		Binds:         binds,
		PortBindings:  network.PortMap{port: {{HostIP: bindAddr(spec.Bind), HostPort: strconv.Itoa(spec.Port)}}},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyOnFailure},
	}
	host.Devices = chipDevices(spec.Chips)
	if len(spec.Chips) > 0 {
		// Shared memory with the host makes umd's chip lock visible across containers.
		host.IpcMode = container.IPCModeHost
	}
	if spec.Hugepages {
		host.Binds = append(host.Binds, hugepagesDir+":"+hugepagesDir)
	}
	user, err := d.containerUser(ctx)
	if err != nil {
		return nil, nil, err
	}
	ep, err := supervisedEntrypoint(entrypoint, spec.Launch, spec.SupervisorFlags)
	if err != nil {
		return nil, nil, err
	}
	cfg := &container.Config{
		Image:        tag,
		User:         user,
		Env:          SortedEnv(spec.ServerEnv(ContainerHF, ContainerHF+"/hub", containerMetalCache)),
		Cmd:          spec.Launch.Argv,
		Entrypoint:   ep,
		ExposedPorts: network.PortSet{port: {}},
		Labels: map[string]string{
			LabelName:    spec.Package.Wire.Name,
			LabelProfile: spec.Profile.Name,
			LabelDevices: chips.Format(spec.Chips),
			LabelPort:    strconv.Itoa(spec.Port),
		},
	}
	return cfg, host, nil
}

// bindAddr is the engine's HostIP for a --bind address (zero: every
// interface).
func bindAddr(bind string) netip.Addr {
	a, err := netip.ParseAddr(bind)
	if err != nil {
		return netip.Addr{}
	}
	return a
}

// chipDevices passes exactly these chips, not the whole /dev/tenstorrent:
// umd locks every chip it can see, so a container seeing all of them would
// block every other server on the host.
func chipDevices(chips []int) []container.DeviceMapping {
	var out []container.DeviceMapping
	for _, c := range chips {
		dev := "/dev/tenstorrent/" + strconv.Itoa(c)
		out = append(out, container.DeviceMapping{PathOnHost: dev, PathInContainer: dev, CgroupPermissions: "rwm"})
	}
	return out
}

// supervisedEntrypoint tells an image whose entrypoint is our supervisor
// (`tt-model supervise [--ready-line L] [--default-env K=V]… --`) how this
// profile's readiness is probed, and passes it extra flags; any other
// entrypoint is kept as it is, and extra flags for it are an error.
func supervisedEntrypoint(ep []string, l manifest.Launch, extra []string) ([]string, error) {
	dash := slices.Index(ep, "--")
	if dash < 0 || !slices.Contains(ep[:dash], "supervise") {
		if len(extra) > 0 {
			return nil, fmt.Errorf("supervisor flags %q given, but the image's entrypoint %q is not `tt-model supervise --`", extra, ep)
		}
		return ep, nil
	}
	// The image's own launch of its default profile gives way to this one:
	// its readiness flags (the kind's ready line) to this launch's, which
	// knows the chosen port, and its --default-env variables (the default
	// profile's, which the image's Env leaves out) to the container's env,
	// which holds this profile's whole environment. A variable only the
	// default profile sets thus never reaches another profile's server.
	var out []string
	for i := 0; i < dash; i++ {
		if imageLaunchFlag(ep[i]) {
			i++
			continue
		}
		if name, _, ok := strings.Cut(ep[i], "="); ok && imageLaunchFlag(name) {
			continue
		}
		out = append(out, ep[i])
	}
	if l.ReadyLine != "" {
		out = append(out, "--ready-line", l.ReadyLine)
	} else if l.ReadyPath != "" {
		out = append(out, "--ready-url", fmt.Sprintf("http://127.0.0.1:%d%s", l.Port, l.ReadyPath))
	}
	out = append(out, extra...)
	return append(out, ep[dash:]...), nil
}

// imageLaunchFlag says whether name is one of the supervisor flags with
// which `tt-model package` writes the default profile's launch into an
// image's entrypoint; each takes a value.
func imageLaunchFlag(name string) bool {
	switch name {
	case "--ready-line", "--ready-url", "--default-env":
		return true
	}
	return false
}

// containerUser makes what the container writes into the bind mounts belong
// to the host user: the host uid:gid on a rootful engine, 0:0 under rootless
// Docker (where container root maps to the invoking user).
func (d *Docker) containerUser(ctx context.Context) (string, error) {
	info, err := d.c.Info(ctx, client.InfoOptions{})
	if err != nil {
		return "", fmt.Errorf("docker info: %w", err)
	}
	for _, opt := range info.Info.SecurityOptions {
		if strings.Contains(opt, "name=rootless") {
			return "0:0", nil
		}
	}
	return fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()), nil
}

// Stop is `docker stop --timeout grace` then `docker rm`; a server killed
// (exit 137) leaves its chips needing a reset, done in a throw-away container
// of the same image, as upstream. It reports what this stop did: a container
// that had already exited is only removed, and a kill is reported as this
// stop's only when the grace ran out.
func (d *Docker) Stop(ctx context.Context, inst *Instance, grace time.Duration, progress io.Writer) (StopResult, error) {
	secs := int(grace / time.Second)
	res := StopResult{ExitCode: -1}
	before, err := d.c.ContainerInspect(ctx, inst.ID, client.ContainerInspectOptions{})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return res, fmt.Errorf("inspect %s: %w", inst.Name, err)
	}
	wasRunning := err == nil && before.Container.State != nil && (before.Container.State.Running || before.Container.State.Restarting)
	started := time.Now()
	if wasRunning {
		if _, err := d.c.ContainerStop(ctx, inst.ID, client.ContainerStopOptions{Timeout: &secs}); err != nil && !cerrdefs.IsNotFound(err) {
			return res, fmt.Errorf("stop %s: %w", inst.Name, err)
		}
	}
	took := time.Since(started)
	info, err := d.c.ContainerInspect(ctx, inst.ID, client.ContainerInspectOptions{})
	if err != nil {
		return res, fmt.Errorf("inspect %s after stop: %w", inst.Name, err)
	}
	image := ""
	if info.Container.State != nil {
		res.ExitCode = info.Container.State.ExitCode
	}
	if info.Container.Config != nil {
		image = info.Container.Config.Image
	}
	switch {
	case !wasRunning:
		res.AlreadyExited = true
	case res.ExitCode == 137 && took >= grace:
		res.Killed = true
	case res.ExitCode == 137:
		res.Detail = append(res.Detail, fmt.Sprintf("it ended with SIGKILL (137) %s into the stop, before the %s grace ran out: killed by something else", took.Round(time.Millisecond), grace))
	}
	if res.ExitCode == 137 {
		res.Reset = d.resetChips(ctx, image, inst.Chips, progress)
	}
	if _, err := d.c.ContainerRemove(ctx, inst.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return res, fmt.Errorf("remove %s: %w", inst.Name, err)
	}
	return res, nil
}

// resetChips runs `tt-smi -r <chips>` in a throw-away container holding
// only those chips, capped at resetTimeout, and says what happened.
func (d *Docker) resetChips(ctx context.Context, image string, chips []int, progress io.Writer) string {
	if len(chips) == 0 {
		return "no chips to reset (the container had no /dev/tenstorrent devices)"
	}
	fmt.Fprintf(progress, "the server was killed after the grace period: resetting chips %s\n", FormatChips(chips))
	host := &container.HostConfig{IpcMode: container.IPCModeHost, Resources: container.Resources{Devices: chipDevices(chips)}}
	cfg := &container.Config{Image: image, Entrypoint: []string{"tt-smi", "-r", FormatChips(chips)}, Cmd: []string{}}
	rctx, cancel := context.WithTimeout(ctx, resetTimeout)
	defer cancel()
	created, err := d.c.ContainerCreate(rctx, client.ContainerCreateOptions{Config: cfg, HostConfig: host})
	if err != nil {
		return fmt.Sprintf("chip reset could not start (%v): a reboot may be needed", err)
	}
	defer d.c.ContainerRemove(context.WithoutCancel(ctx), created.ID, client.ContainerRemoveOptions{Force: true})
	if _, err := d.c.ContainerStart(rctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return fmt.Sprintf("chip reset could not start (%v): a reboot may be needed", err)
	}
	wait := d.c.ContainerWait(rctx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case r := <-wait.Result:
		if r.StatusCode != 0 {
			return fmt.Sprintf("tt-smi -r %s exited %d: a reboot may be needed", FormatChips(chips), r.StatusCode)
		}
		return "chips " + FormatChips(chips) + " reset"
	case err := <-wait.Error:
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Sprintf("tt-smi -r %s did not finish in %s: a reboot may be needed", FormatChips(chips), resetTimeout)
		}
		return fmt.Sprintf("chip reset failed (%v): a reboot may be needed", err)
	}
}

// Logs copies the container's stdout and stderr to w. Following, it goes on
// across restarts of the container by the engine (its restart policy), from
// where the last stream ended, and ends with a *FollowEnded saying why when
// the container stops for good or is removed.
func (d *Docker) Logs(ctx context.Context, inst *Instance, follow bool, w io.Writer) error {
	ts := &timestampCutter{w: w}
	out := w
	if follow {
		out = ts
	}
	since := ""
	for {
		rc, err := d.c.ContainerLogs(ctx, inst.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: follow, Timestamps: follow, Since: since})
		if err != nil {
			if follow && cerrdefs.IsNotFound(err) {
				return &FollowEnded{Instance: inst, Reason: "the container was removed"}
			}
			return fmt.Errorf("logs of %s: %w", inst.Name, err)
		}
		_, err = stdcopy.StdCopy(out, out, rc)
		rc.Close()
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("logs of %s: %w", inst.Name, err)
		}
		if !follow || ctx.Err() != nil {
			return nil
		}
		why, again := d.restartedAfterStream(ctx, inst)
		if !again {
			return &FollowEnded{Instance: inst, Reason: why}
		}
		if !ts.last.IsZero() {
			since = ts.last.Add(time.Nanosecond).Format(time.RFC3339Nano)
		}
	}
}

// restartedAfterStream waits, after a followed log stream ended, to see
// whether the engine restarts the container (on-failure passes through
// "restarting", after a delay that grows with each restart) and says why
// not when it does not.
func (d *Docker) restartedAfterStream(ctx context.Context, inst *Instance) (why string, again bool) {
	settle := time.Now().Add(2 * time.Second) // the engine marks a restart right after the exit
	for {
		res, err := d.c.ContainerInspect(ctx, inst.ID, client.ContainerInspectOptions{})
		switch {
		case cerrdefs.IsNotFound(err):
			return "the container was removed", false
		case err != nil:
			return fmt.Sprintf("inspect %s: %v", inst.Name, err), false
		}
		st := res.Container.State
		switch {
		case st == nil:
			return "the engine reports no state", false
		case st.Running && !st.Restarting:
			return "", true
		case st.Restarting:
			settle = time.Now().Add(time.Hour) // wait for the restart, however long the backoff
		case time.Now().After(settle):
			return fmt.Sprintf("%s exited (code %d) and the engine does not restart it", inst.Name, st.ExitCode), false
		}
		select {
		case <-ctx.Done():
			return "", false
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// timestampCutter strips the RFC 3339 timestamp the engine puts before each
// line (Timestamps: true) and keeps the last one, so a follow that resumes
// after a restart asks only for what came after it.
type timestampCutter struct {
	w       io.Writer
	last    time.Time
	midLine bool // the next bytes continue a line whose stamp was cut
}

func (c *timestampCutter) Write(p []byte) (int, error) {
	for rest := p; len(rest) > 0; {
		if !c.midLine {
			if i := bytes.IndexByte(rest, ' '); i > 0 {
				if t, err := time.Parse(time.RFC3339Nano, string(rest[:i])); err == nil {
					c.last = t
					rest = rest[i+1:]
				}
			}
		}
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i+1], rest[i+1:]
			c.midLine = false
		} else {
			rest, c.midLine = nil, true
		}
		if _, err := c.w.Write(line); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}
