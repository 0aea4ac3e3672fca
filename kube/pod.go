package kube

import (
	"fmt"
	"github.com/ttmodel/tt-model/supervisor"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ttmodel/tt-model/builder"
	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/runner"
	"github.com/ttmodel/tt-model/server/api"
)

// Probe timing. The status endpoint and /health answer from memory, so a
// probe that takes 5 s means the process is stuck.
const (
	probePeriod  = 10 * time.Second
	probeTimeout = 5 * time.Second
	// probeFailures is how many failed probes in a row mark a replica not
	// ready, or a supervisor dead.
	probeFailures = 3
)

// Paths inside the pod.
const (
	manifestDir   = "/etc/tt-model"
	hugepagesPath = "/dev/hugepages-1G"
	// defaultMarkerName is the hang marker in the cache volume when the
	// profile does not name one.
	defaultMarkerName = "hang_marker"
	hangMarkerEnv     = "PI05_HANG_MARKER"
	visibleDevicesEnv = "TT_METAL_VISIBLE_DEVICES"
)

// Volume names.
const (
	volCache     = "cache"
	volManifest  = "manifest"
	volTmp       = "tmp"
	volHome      = "home"
	volHugepages = "hugepages"
	volAPIKey    = "api-key"
)

// The API key Secret's key, and where its file is mounted.
const (
	apiKeySecretKey = "api-key"
	apiKeyDir       = "/run/secrets/tt-model"
)

// Sub-folders of the cache volume.
const (
	subHF    = "hf"    // HF_HOME: the weights, shared by the replicas on a host path
	subCache = "cache" // TT_METAL_CACHE and the hang marker: one per replica
)

type podInput struct {
	pkg         *runner.Package
	prof        manifest.Profile
	launch      manifest.Launch
	name, image string
	chips       chipRequest
	opts        Options
}

// podSpec is the replica's pod: the supervisor as PID 1 running the server,
// preceded by the weights job when the package pins weights.
func podSpec(in podInput) (corev1.PodSpec, error) {
	marker, err := hangMarker(in.prof.Name, in.launch.Env)
	if err != nil {
		return corev1.PodSpec{}, err
	}
	hugepages := drivesChips(in.pkg.Wire.Container.Kind, in.chips) && !in.opts.NoHugepages
	mounts := []corev1.VolumeMount{
		{Name: volCache, MountPath: builder.ImageHFDir, SubPath: subHF},
		cacheMount(in.opts),
		{Name: volTmp, MountPath: "/tmp"},
		{Name: volHome, MountPath: builder.ImageHomeDir},
	}
	if hugepages {
		mounts = append(mounts, corev1.VolumeMount{Name: volHugepages, MountPath: hugepagesPath})
	}
	server := corev1.Container{
		Name:            "server",
		Image:           in.image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         supervisorArgv(in.launch, in.opts, marker),
		Args:            serverArgv(in.launch),
		Env:             serverEnv(in.pkg, in.launch, in.chips),
		Ports: []corev1.ContainerPort{
			{Name: portHTTP, ContainerPort: int32(in.launch.Port), Protocol: corev1.ProtocolTCP},
			{Name: portStatus, ContainerPort: in.opts.StatusPort, Protocol: corev1.ProtocolTCP},
		},
		Resources:       resources(in.chips, in.opts),
		VolumeMounts:    mounts,
		StartupProbe:    startupProbe(in.opts.StartTimeout),
		LivenessProbe:   supervisorProbe(probeFailures),
		ReadinessProbe:  readinessProbe(in.launch),
		SecurityContext: containerSecurity(in.pkg.Wire.Container.Kind),
	}
	if in.opts.APIKeySecret != "" {
		server.VolumeMounts = append(server.VolumeMounts, corev1.VolumeMount{Name: volAPIKey, MountPath: apiKeyDir, ReadOnly: true})
		server.Env = append(server.Env, corev1.EnvVar{Name: api.APIKeyFileEnv, Value: path.Join(apiKeyDir, apiKeySecretKey)})
	}
	spec := corev1.PodSpec{
		Containers:                    []corev1.Container{server},
		TerminationGracePeriodSeconds: ptr(seconds(terminationGrace(in.opts.StopGrace))),
		SecurityContext:               podSecurity(),
		// The server needs no Kubernetes API and no service variables.
		AutomountServiceAccountToken: ptr(false),
		EnableServiceLinks:           ptr(false),
		Volumes:                      volumes(in, hugepages),
	}
	if in.chips.mode == ChipsDRA {
		spec.ResourceClaims = podClaims(claimTemplateName(in.name))
	}
	if len(in.pkg.WeightRefs()) > 0 {
		spec.InitContainers = []corev1.Container{weightsJob(in)}
	}
	for i := range spec.InitContainers {
		literalStrings(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		literalStrings(&spec.Containers[i])
	}
	return spec, nil
}

// literalStrings escapes the kubelet's variable expansion in what it expands: a container's command
// and args, its env values and its exec probes' commands. The kubelet turns $(NAME) into NAME's
// value and $$ into $ there (k8s.io/kubernetes third_party/forked/golang/expansion), so a profile's
// "$(HOME)" or "$$" would reach the server changed; with every $ doubled each value arrives as
// `tt-model profiles` shows it. The pod's own references (the cache's subPathExpr) are not these.
func literalStrings(c *corev1.Container) {
	literal := func(words []string) {
		for i, w := range words {
			words[i] = strings.ReplaceAll(w, "$", "$$")
		}
	}
	literal(c.Command)
	literal(c.Args)
	for i := range c.Env {
		c.Env[i].Value = strings.ReplaceAll(c.Env[i].Value, "$", "$$")
	}
	for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
		if p != nil && p.Exec != nil {
			literal(p.Exec.Command)
		}
	}
}

// supervisorArgv is the container's command: `tt-model supervise` as PID 1
// with the profile's readiness, the start timeout and stop grace the probes
// are derived from, the hang marker on the cache volume and the status
// endpoint the liveness probe reads.
func supervisorArgv(l manifest.Launch, o Options, marker string) []string {
	argv := []string{builder.ImageToolPath, "supervise"}
	if l.ReadyLine != "" {
		argv = append(argv, "--ready-line", l.ReadyLine)
	} else {
		argv = append(argv, "--ready-url", healthURL(l))
	}
	argv = append(argv,
		"--start-timeout", o.StartTimeout.String(),
		"--stop-grace", o.StopGrace.String(),
		"--hang-marker", marker,
		"--status-addr", ":"+strconv.Itoa(int(o.StatusPort)),
	)
	if o.ResetCmd != "" {
		argv = append(argv, "--reset-cmd", o.ResetCmd)
	}
	return append(argv, "--")
}

// serverArgv is the profile's server command with the image's path for it.
func serverArgv(l manifest.Launch) []string {
	argv := slices.Clone(l.Argv)
	if len(argv) > 0 && argv[0] == path.Base(builder.ImageServerPath) {
		argv[0] = builder.ImageServerPath
	}
	return argv
}

func healthURL(l manifest.Launch) string {
	p := l.ReadyPath
	if p == "" {
		p = "/health"
	}
	return fmt.Sprintf("http://127.0.0.1:%d%s", l.Port, p)
}

// hangMarker is where the supervisor (and a pi0.5 server, which writes it
// itself) keep the hang marker: the profile's PI05_HANG_MARKER, which must
// then lie in the replica's cache folder so it outlives the container, else
// a file there.
func hangMarker(profile string, env map[string]string) (string, error) {
	p, ok := env[hangMarkerEnv]
	if !ok || p == "" {
		return path.Join(builder.ImageCacheDir, defaultMarkerName), nil
	}
	if !strings.HasPrefix(path.Clean(p), builder.ImageCacheDir+"/") {
		return "", fmt.Errorf("profile %s: %s=%s is outside %s, the replica's cache volume: the marker would not outlive the container",
			profile, hangMarkerEnv, p, builder.ImageCacheDir)
	}
	return path.Clean(p), nil
}

// serverEnv is the profile's server environment with the caches at the
// volume mounts (the packed weights, unless the profile says where, on the
// replica's cache volume so a restarted container maps them instead of
// packing again) and HF_MODEL at the pinned snapshot the weights job
// fetched, so the server never asks the Hub. Sorted, as the image's.
//
// When Kubernetes hands out the chips, the profile's TT_METAL_VISIBLE_DEVICES
// is dropped: the container sees only the device nodes allocated to it
// (/dev/tenstorrent/<N> keeps the host's N), so a host-side index such as
// "0" would name a chip the pod may not have.
func serverEnv(pkg *runner.Package, l manifest.Launch, chips chipRequest) []corev1.EnvVar {
	env := map[string]string{"TT_WEIGHT_CACHE": path.Join(builder.ImageCacheDir, "packed-weights")}
	for k, v := range l.Env {
		env[k] = v
	}
	if chips.mode != ChipsNone {
		delete(env, visibleDevicesEnv)
	}
	env["HF_HOME"] = builder.ImageHFDir
	env["TT_METAL_CACHE"] = builder.ImageCacheDir
	if w := pkg.Wire.Weights; w != nil && w.Revision != nil && hub.IsCommit(*w.Revision) && env["HF_MODEL"] == w.Repo {
		env["HF_MODEL"] = runner.ContainerSnapshotPath(w.Repo, *w.Revision)
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]corev1.EnvVar, 0, len(keys)+1)
	for _, k := range keys {
		out = append(out, corev1.EnvVar{Name: k, Value: env[k]})
	}
	return append(out, podNameEnv())
}

// podNameEnv gives the container its pod's name (the per-replica cache
// folder on a host path is named after it).
func podNameEnv() corev1.EnvVar {
	return corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"},
	}}
}

// cacheMount is the replica's own cache folder at /cache: a folder of its
// PVC, or of the host path named after the pod.
func cacheMount(o Options) corev1.VolumeMount {
	m := corev1.VolumeMount{Name: volCache, MountPath: builder.ImageCacheDir, SubPath: subCache}
	if o.CacheHostPath != "" {
		m.SubPath, m.SubPathExpr = "", subCache+"/$(POD_NAME)"
	}
	return m
}

// resources are the chips (the device plugin's extended resource, whose
// requests must equal its limits, or the DRA claim) and the CPU and memory.
func resources(chips chipRequest, o Options) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{}
	set := func(l *corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
		if *l == nil {
			*l = corev1.ResourceList{}
		}
		(*l)[name] = q
	}
	switch chips.mode {
	case ChipsDevicePlugin:
		q := *resource.NewQuantity(chips.count, resource.DecimalSI)
		set(&r.Requests, corev1.ResourceName(chips.resource), q)
		set(&r.Limits, corev1.ResourceName(chips.resource), q)
	case ChipsDRA:
		r.Claims = []corev1.ResourceClaim{{Name: claimName}}
	}
	if !o.CPU.IsZero() {
		set(&r.Requests, corev1.ResourceCPU, o.CPU)
	}
	if !o.Memory.IsZero() {
		set(&r.Requests, corev1.ResourceMemory, o.Memory)
		set(&r.Limits, corev1.ResourceMemory, o.Memory)
	}
	return r
}

// startupProbe gives the supervisor as long to answer as the supervisor
// gives the server to become ready: failureThreshold × period = the start
// timeout. It asks the supervisor, not the server: the supervisor enforces
// the start timeout itself (chip reset, restart in place), and a kubelet
// deadline on the server would race it and restart the container instead.
func startupProbe(startTimeout time.Duration) *corev1.Probe {
	period := seconds(probePeriod)
	return supervisorProbe(int32((seconds(startTimeout) + period - 1) / period))
}

// supervisorProbe asks the supervisor's status endpoint, which answers while
// the supervisor runs, whatever the server is doing (a long inference, a
// chip reset, a restart).
func supervisorProbe(failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/status", Port: intOrName(portStatus)}},
		PeriodSeconds:    int32(seconds(probePeriod)),
		TimeoutSeconds:   int32(seconds(probeTimeout)),
		FailureThreshold: failures,
		SuccessThreshold: 1,
	}
}

// readinessProbe runs `tt-model health` on the server's /health: the
// server answers 200 while it starts, so only the JSON status tells.
func readinessProbe(l manifest.Launch) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{
			// --degraded-ok: a server serving on the devices its watchdog did not
			// quarantine still answers its robots; the Service keeps it.
			builder.ImageToolPath, "health", healthURL(l), "--timeout", (probeTimeout - time.Second).String(), "--degraded-ok",
		}}},
		PeriodSeconds:    int32(seconds(probePeriod)),
		TimeoutSeconds:   int32(seconds(probeTimeout)),
		FailureThreshold: probeFailures,
		SuccessThreshold: 1,
	}
}

// drivesChips says whether the server itself opens the chips (tt-metal's
// kinds), and so needs the host's hugepages. tt-model-server computes on the
// CPU; its supervisor only locks and resets the chips.
func drivesChips(kind string, chips chipRequest) bool {
	return chips.mode != ChipsNone && kind != manifest.KindGoServer
}

// podSecurity runs the pod as the image's tt user; fsGroup makes the cache
// volume writable by it.
func podSecurity() *corev1.PodSecurityContext {
	onRootMismatch := corev1.FSGroupChangeOnRootMismatch
	return &corev1.PodSecurityContext{
		RunAsNonRoot:        ptr(true),
		RunAsUser:           ptr(int64(builder.ImageUID)),
		RunAsGroup:          ptr(int64(builder.ImageGID)),
		FSGroup:             ptr(int64(builder.ImageGID)),
		FSGroupChangePolicy: &onRootMismatch, // the weights are large: no recursive chown at every start
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// containerSecurity drops every capability; the root file system is
// read-only for tt-model-server, which writes only to the mounted caches and
// /tmp (other kinds' servers write where their images say, unknown here).
func containerSecurity(kind string) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr(kind == manifest.KindGoServer),
	}
}

// weightsJob pulls the pinned weights into the cache volume before the
// server starts; a snapshot already complete there needs no network, so
// the weights are fetched once per volume, not once per start.
func weightsJob(in podInput) corev1.Container {
	env := []corev1.EnvVar{
		{Name: "HF_HOME", Value: builder.ImageHFDir},
		{Name: "HOME", Value: builder.ImageHomeDir},
	}
	if in.opts.HFTokenSecret != "" {
		env = append(env, corev1.EnvVar{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: in.opts.HFTokenSecret}, Key: "HF_TOKEN"},
		}})
	}
	if in.opts.HFEndpoint != "" {
		env = append(env, corev1.EnvVar{Name: "HF_ENDPOINT", Value: in.opts.HFEndpoint})
	}
	return corev1.Container{
		Name:            "weights",
		Image:           in.image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{builder.ImageToolPath, "weights", "pull",
			path.Join(manifestDir, manifest.WireFile), "--profile", in.prof.Name},
		Env: env,
		VolumeMounts: []corev1.VolumeMount{
			{Name: volCache, MountPath: builder.ImageHFDir, SubPath: subHF},
			{Name: volManifest, MountPath: manifestDir, ReadOnly: true},
			{Name: volTmp, MountPath: "/tmp"},
			{Name: volHome, MountPath: builder.ImageHomeDir},
		},
		SecurityContext: containerSecurity(in.pkg.Wire.Container.Kind),
		// A failed pull's last lines (the file, the sha256 it expected)
		// become the container's termination message, which k8s status shows.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

func volumes(in podInput, hugepages bool) []corev1.Volume {
	vols := []corev1.Volume{
		{Name: volManifest, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: in.name + "-manifest"},
		}}},
		{Name: volTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: volHome, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	if in.opts.CacheHostPath != "" {
		vols = append(vols, hostPathVolume(volCache, in.opts.CacheHostPath, corev1.HostPathDirectoryOrCreate))
	}
	if hugepages {
		// umd maps its host memory from files in exactly this hugetlbfs mount.
		vols = append(vols, hostPathVolume(volHugepages, hugepagesPath, corev1.HostPathDirectory))
	}
	if in.opts.APIKeySecret != "" {
		// Readable by the pod's group (fsGroup) alone: the server runs as uid 1000, not root.
		vols = append(vols, corev1.Volume{Name: volAPIKey, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: in.opts.APIKeySecret, DefaultMode: ptr(int32(0o440)),
			Items: []corev1.KeyToPath{{Key: apiKeySecretKey, Path: apiKeySecretKey}},
		}}})
	}
	return vols
}

func hostPathVolume(name, dir string, t corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &t}}}
}

// cacheClaim is each replica's cache PVC: the weights, the kernel cache and
// the hang marker outlive the container and the pod. It carries the
// instance's labels, so `k8s delete --volumes` finds the claims.
func cacheClaim(o Options, labels map[string]string) corev1.PersistentVolumeClaim {
	c := corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: volCache, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: o.CacheSize}},
		},
	}
	if o.StorageClass != "" {
		c.Spec.StorageClassName = ptr(o.StorageClass)
	}
	return c
}

func intOrName(name string) intstr.IntOrString { return intstr.FromString(name) }

func ptr[T any](v T) *T { return &v }

// terminationGrace is how long the kubelet waits between its SIGTERM and its
// SIGKILL of the supervisor: the supervisor's longest stop with this stop
// grace (supervisor.Config.StopBudget: the grace, the SIGKILL, the wait for
// the reap) plus the margin a systemd unit gives it (supervisor.StopMargin),
// so the kubelet only ever kills a supervisor that is itself stuck.
func terminationGrace(stopGrace time.Duration) time.Duration {
	c := supervisor.Defaults(0)
	c.StopGrace = stopGrace
	return c.StopBudget() + supervisor.StopMargin
}
