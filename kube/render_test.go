package kube

import (
	"flag"
	"github.com/ttmodel/tt-model/internal/testing/textcheck"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/runner"
	"github.com/ttmodel/tt-model/supervisor"
)

var update = flag.Bool("update", false, "rewrite the rendered-manifest goldens under testdata/")

// TestRenderGolden renders every profile of both packages with the
// defaults and compares the YAML with testdata/<package>-<profile>.yaml.
func TestRenderGolden(t *testing.T) {
	for _, model := range models {
		pkg := stagedPackage(t, model, nil)
		for _, prof := range profiles(pkg) {
			t.Run(model+"/"+prof, func(t *testing.T) {
				m, err := Render(pkg, Options{Registry: testRegistry, Profile: prof})
				if err != nil {
					t.Fatal(err)
				}
				got, err := YAML(m.Objects())
				if err != nil {
					t.Fatal(err)
				}
				textcheck.Golden(t, filepath.Join("testdata", pkg.Wire.Name+"-"+prof+".yaml"), got, *update, "go test ./kube -run TestRenderGolden -update")
			})
		}
	}
}

// TestProbeBudgets holds, for every profile and for the defaults and other
// supervisor settings: the startup probe's budget (failureThreshold ×
// periodSeconds) equals the supervisor's --start-timeout in the container's
// command, and the termination grace is at least its --stop-grace.
func TestProbeBudgets(t *testing.T) {
	settings := []Options{{}, {StartTimeout: 15 * time.Minute, StopGrace: 10 * time.Second}, {StartTimeout: 10 * time.Second, StopGrace: 90 * time.Second}}
	for _, model := range models {
		pkg := stagedPackage(t, model, nil)
		for _, prof := range profiles(pkg) {
			for _, o := range settings {
				o.Profile, o.Registry = prof, testRegistry
				m, err := Render(pkg, o)
				if err != nil {
					t.Fatalf("%s/%s: %v", model, prof, err)
				}
				pod := m.StatefulSet.Spec.Template.Spec
				c := pod.Containers[0]
				start := flagDuration(t, c.Command, "--start-timeout")
				stop := flagDuration(t, c.Command, "--stop-grace")
				if o.StartTimeout != 0 && start != o.StartTimeout {
					t.Errorf("%s/%s: --start-timeout %s, asked for %s", model, prof, start, o.StartTimeout)
				}
				if o.StartTimeout == 0 && start != supervisor.Defaults(0).StartTimeout {
					t.Errorf("%s/%s: default --start-timeout %s, the supervisor's is %s", model, prof, start, supervisor.Defaults(0).StartTimeout)
				}
				sp := c.StartupProbe
				budget := time.Duration(sp.FailureThreshold) * time.Duration(sp.PeriodSeconds) * time.Second
				if budget != start {
					t.Errorf("%s/%s: startup probe budget %d × %ds = %s, supervisor start timeout %s", model, prof, sp.FailureThreshold, sp.PeriodSeconds, budget, start)
				}
				// The kubelet's SIGKILL must come after the supervisor's longest stop.
				sup := supervisor.Defaults(0)
				sup.StopGrace = stop
				grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
				if grace <= sup.StopBudget() {
					t.Errorf("%s/%s: terminationGracePeriodSeconds %s <= the supervisor's longest stop %s (--stop-grace %s)", model, prof, grace, sup.StopBudget(), stop)
				}
			}
		}
	}
}

// flagDuration reads "--name VALUE" from argv.
func flagDuration(t *testing.T, argv []string, name string) time.Duration {
	t.Helper()
	i := slices.Index(argv, name)
	if i < 0 || i+1 >= len(argv) {
		t.Fatalf("%s not in %q", name, argv)
	}
	d, err := time.ParseDuration(argv[i+1])
	if err != nil {
		t.Fatalf("%s %q: %v", name, argv[i+1], err)
	}
	return d
}

// TestRenderShape checks what each package's pod must carry, beyond the
// goldens: the image by digest, supervise as PID 1 before the server argv,
// chips as the device plugin's resource, the probes' targets and the
// volumes at the image's paths.
func TestRenderShape(t *testing.T) {
	cases := []struct {
		model, profile string
		boards         int64
	}{
		{"rf-detr", "default", 1},
		{"pi05", "multi-robot", 2},
		{"pi05", "disaggregated", 2},
	}
	for _, tc := range cases {
		pkg := stagedPackage(t, tc.model, nil)
		m, err := Render(pkg, Options{Registry: testRegistry, Profile: tc.profile, Replicas: ptr(int32(2))})
		if err != nil {
			t.Fatal(err)
		}
		pod := m.StatefulSet.Spec.Template.Spec
		c := pod.Containers[0]
		if want := testRegistry + "/" + pkg.Wire.Name + "@" + fakeDigest; c.Image != want || m.Image != want {
			t.Errorf("%s: image %q, want %q", tc.model, c.Image, want)
		}
		if c.Command[0] != "/usr/local/bin/tt-model" || c.Command[1] != "supervise" || c.Command[len(c.Command)-1] != "--" {
			t.Errorf("%s: command %q is not `tt-model supervise … --`", tc.model, c.Command)
		}
		if c.Args[0] != "/usr/local/bin/tt-model-server" {
			t.Errorf("%s: args %q do not start with the server", tc.model, c.Args)
		}
		// The chips come from the DRA driver by default: one claim per pod,
		// made from the instance's template, counting boards.
		if len(c.Resources.Claims) != 1 || c.Resources.Claims[0].Name != "chips" ||
			len(pod.ResourceClaims) != 1 || *pod.ResourceClaims[0].ResourceClaimTemplateName != m.Name+"-chips" {
			t.Errorf("%s/%s: claims %+v / %+v", tc.model, tc.profile, c.Resources.Claims, pod.ResourceClaims)
		}
		if m.ClaimTemplate == nil || m.ClaimTemplate.Spec.Spec.Devices.Requests[0].Exactly.Count != tc.boards {
			t.Errorf("%s/%s: claim template %+v, want %d boards", tc.model, tc.profile, m.ClaimTemplate, tc.boards)
		}
		if got := c.LivenessProbe.HTTPGet; got == nil || got.Path != "/status" || got.Port.StrVal != "status" {
			t.Errorf("%s: liveness probe %+v is not the supervisor's /status", tc.model, c.LivenessProbe)
		}
		if got := c.ReadinessProbe.Exec; got == nil || !slices.Contains(got.Command, "http://127.0.0.1:8000/health") || got.Command[1] != "health" {
			t.Errorf("%s: readiness probe %+v is not tt-model health on the server", tc.model, c.ReadinessProbe)
		}
		mounts := map[string]string{}
		for _, vm := range c.VolumeMounts {
			mounts[vm.MountPath] = vm.Name
		}
		// tt-model-server computes on the CPU: no hugepages.
		for path, vol := range map[string]string{"/hf": volCache, "/cache": volCache, "/tmp": volTmp, "/dev/hugepages-1G": ""} {
			if mounts[path] != vol {
				t.Errorf("%s: %s mounts %q, want volume %q", tc.model, path, mounts[path], vol)
			}
		}
		if !*c.SecurityContext.ReadOnlyRootFilesystem || !*pod.SecurityContext.RunAsNonRoot || *pod.SecurityContext.RunAsUser != 1000 {
			t.Errorf("%s: security context %+v / %+v", tc.model, c.SecurityContext, pod.SecurityContext)
		}
		if len(pod.InitContainers) != 1 || !slices.Equal(pod.InitContainers[0].Command[:3], []string{"/usr/local/bin/tt-model", "weights", "pull"}) {
			t.Errorf("%s: init containers %+v, want the weights job", tc.model, pod.InitContainers)
		}
		if *m.StatefulSet.Spec.Replicas != 2 || len(m.StatefulSet.Spec.VolumeClaimTemplates) != 1 {
			t.Errorf("%s: replicas %d, claim templates %d", tc.model, *m.StatefulSet.Spec.Replicas, len(m.StatefulSet.Spec.VolumeClaimTemplates))
		}
		if env := envOf(c); !strings.HasPrefix(env["HF_MODEL"], "/hf/hub/models--") || env["TT_METAL_CACHE"] != "/cache" {
			t.Errorf("%s: env HF_MODEL=%q TT_METAL_CACHE=%q", tc.model, env["HF_MODEL"], env["TT_METAL_CACHE"])
		}
	}
}

func envOf(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}

// TestRenderPi05Marker: pi0.5's profiles name their hang marker
// (PI05_HANG_MARKER=/cache/pi05_hang_marker); the supervisor must watch the
// same file, on the cache volume.
func TestRenderPi05Marker(t *testing.T) {
	pkg := stagedPackage(t, "pi05", nil)
	m, err := Render(pkg, Options{Registry: testRegistry})
	if err != nil {
		t.Fatal(err)
	}
	c := m.StatefulSet.Spec.Template.Spec.Containers[0]
	i := slices.Index(c.Command, "--hang-marker")
	if i < 0 || c.Command[i+1] != "/cache/pi05_hang_marker" || envOf(c)["PI05_HANG_MARKER"] != "/cache/pi05_hang_marker" {
		t.Errorf("hang marker: command %q, env %q", c.Command, envOf(c)["PI05_HANG_MARKER"])
	}
}

// TestRenderOptions covers the flags that change the shape.
func TestRenderOptions(t *testing.T) {
	pkg := stagedPackage(t, "rf-detr", nil)
	m, err := Render(pkg, Options{
		Namespace: "ml", Name: "detector", Registry: "registry.example:5000/team/", ChipResource: "tenstorrent.com/p150a",
		NoHugepages: true, CacheHostPath: "/srv/tt-model", HFTokenSecret: "hf", ResetCmd: "tt-smi -r {chips}",
		HFEndpoint: "https://hf-mirror.example",
	})
	if err != nil {
		t.Fatal(err)
	}
	pod := m.StatefulSet.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != "registry.example:5000/team/rf-detr@"+fakeDigest {
		t.Errorf("image %q", c.Image)
	}
	if m.StatefulSet.Namespace != "ml" || m.StatefulSet.Name != "detector" || m.Service.Name != "detector" || m.ConfigMap.Name != "detector-manifest" {
		t.Errorf("names: %s/%s, service %s, config map %s", m.StatefulSet.Namespace, m.StatefulSet.Name, m.Service.Name, m.ConfigMap.Name)
	}
	if _, ok := c.Resources.Limits["tenstorrent.com/p150a"]; !ok {
		t.Errorf("limits %v", c.Resources.Limits)
	}
	for _, v := range pod.Volumes {
		if v.Name == volHugepages {
			t.Error("--no-hugepages still mounts /dev/hugepages-1G")
		}
		if v.Name == volCache && (v.HostPath == nil || v.HostPath.Path != "/srv/tt-model") {
			t.Errorf("cache volume %+v, want the host path", v)
		}
	}
	if len(m.StatefulSet.Spec.VolumeClaimTemplates) != 0 {
		t.Error("a host-path cache still has a claim template")
	}
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == "/cache" && vm.SubPathExpr != "cache/$(POD_NAME)" {
			t.Errorf("/cache on a host path: %+v, want a folder per pod", vm)
		}
	}
	w := pod.InitContainers[0]
	if len(w.Env) < 3 || w.Env[2].ValueFrom == nil || w.Env[2].ValueFrom.SecretKeyRef.Name != "hf" {
		t.Errorf("weights job env %+v, want HF_TOKEN from secret hf", w.Env)
	}
	if envOf(w)["HF_ENDPOINT"] != "https://hf-mirror.example" || envOf(c)["HF_ENDPOINT"] != "" {
		t.Errorf("HF_ENDPOINT: weights job %q, server %q; want the mirror in the job only", envOf(w)["HF_ENDPOINT"], envOf(c)["HF_ENDPOINT"])
	}
	if !slices.Contains(c.Command, "--reset-cmd") {
		t.Errorf("command %q lacks --reset-cmd", c.Command)
	}

	none, err := Render(pkg, Options{Registry: testRegistry, ChipResource: NoChipResource})
	if err != nil {
		t.Fatal(err)
	}
	nc := none.StatefulSet.Spec.Template.Spec.Containers[0]
	if _, ok := nc.Resources.Limits["tenstorrent.com/blackhole"]; ok || len(nc.Resources.Claims) != 0 || none.ClaimTemplate != nil {
		t.Errorf("--chip-resource none: limits %v, claims %v", nc.Resources.Limits, nc.Resources.Claims)
	}
	for _, v := range none.StatefulSet.Spec.Template.Spec.Volumes {
		if v.Name == volHugepages {
			t.Error("no chips, yet /dev/hugepages-1G is mounted")
		}
	}
}

// TestRenderRefuses: bad inputs are clear errors naming what is wrong.
func TestRenderRefuses(t *testing.T) {
	good := stagedPackage(t, "pi05", nil)
	noDigest := stagedPackage(t, "rf-detr", func(w *manifest.Wire) { w.Container.Image.Digest = "" })
	badMarker := stagedPackage(t, "pi05", func(w *manifest.Wire) { w.Container.Serve.Env["PI05_HANG_MARKER"] = "/tmp/marker" })
	oddBoard := stagedPackage(t, "rf-detr", func(w *manifest.Wire) { w.Container.Serve.Hardware = "q900" })
	cases := []struct {
		name string
		pkg  *runner.Package
		opts Options
		want string
	}{
		{"unknown profile", good, Options{Profile: "fast"}, `no serve profile named "fast"; available: multi-robot, single-robot, disaggregated`},
		{"no digest", noDigest, Options{}, "container.image.digest is empty"},
		{"marker off the volume", badMarker, Options{}, "PI05_HANG_MARKER=/tmp/marker is outside /cache"},
		{"bad name", good, Options{Name: "Pi05_Server"}, `name "Pi05_Server"`},
		{"long name", good, Options{Name: strings.Repeat("a", 53)}, "at most 52"},
		{"start timeout off the period", good, Options{StartTimeout: 7*time.Minute + 5*time.Second}, "--start-timeout 7m5s: want a positive multiple of 10s"},
		{"negative replicas", good, Options{Replicas: ptr(int32(-1))}, "--replicas -1"},
		{"unknown board", oddBoard, Options{}, `profile default: hardware: "q900" names no known board: want one of e150, e75, n150, n300, p100, p150, p300; give --chips none`},
		{"unknown board, device plugin", oddBoard, Options{Chips: ChipsDevicePlugin}, `"q900" names no known board`},
		{"unknown board, named resource", oddBoard, Options{ChipResource: "example.com/q900"}, ""},
		{"unknown board, no chips", oddBoard, Options{Chips: ChipsNone}, ""},
		{"unknown chips mode", good, Options{Chips: "gpu"}, `--chips "gpu": want one of dra, device-plugin, none`},
		{"named resource under DRA", good, Options{Chips: ChipsDRA, ChipResource: "example.com/q900"}, "--chip-resource example.com/q900 names a device-plugin resource, but --chips is dra"},
		{"no chips, and DRA", good, Options{Chips: ChipsDRA, ChipResource: NoChipResource}, "--chip-resource none contradicts --chips dra"},
	}
	for _, tc := range cases {
		tc.opts.Registry = testRegistry
		_, err := Render(tc.pkg, tc.opts)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

// TestRenderNeedsPullableImage: a package whose image no node can pull by
// the rendered reference (image.registry "hf", nothing pushed) is refused
// unless --registry or --image-name says where the image is.
func TestRenderNeedsPullableImage(t *testing.T) {
	pkg := stagedPackage(t, "rf-detr", nil)
	if pkg.Wire.Container.Image.Registry != "hf" {
		t.Fatalf("the staged package's image.registry is %q, want hf", pkg.Wire.Container.Image.Registry)
	}
	_, err := Render(pkg, Options{})
	if err == nil || !strings.Contains(err.Error(), `image.registry is "hf", which no node can pull from`) ||
		!strings.Contains(err.Error(), "--registry HOST/NS") || !strings.Contains(err.Error(), "--image-name tt-model/rf-detr") {
		t.Errorf("no registry: %v", err)
	}
	m, err := Render(pkg, Options{ImageName: "tt-model/rf-detr"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "tt-model/rf-detr@" + fakeDigest; m.Image != want || m.StatefulSet.Spec.Template.Spec.Containers[0].Image != want {
		t.Errorf("--image-name: image %q, want %q", m.Image, want)
	}
	for _, o := range []Options{{ImageName: "tt-model/rf-detr@" + fakeDigest}, {ImageName: "x", Registry: testRegistry}} {
		if _, err := Render(pkg, o); err == nil {
			t.Errorf("%+v: rendered", o)
		}
	}
}

// TestRenderZeroReplicas: --replicas 0 is kept (scaled to zero), not taken
// for "the default".
func TestRenderZeroReplicas(t *testing.T) {
	m, err := Render(stagedPackage(t, "rf-detr", nil), Options{Registry: testRegistry, Replicas: ptr(int32(0))})
	if err != nil {
		t.Fatal(err)
	}
	if *m.StatefulSet.Spec.Replicas != 0 {
		t.Errorf("replicas %d, want 0", *m.StatefulSet.Spec.Replicas)
	}
}

// TestRenderRequests: the CPU and memory requests come from the model's
// measured needs (peak RSS plus headroom; the profile's threads, else one
// per device), and --cpu/--memory replace them.
func TestRenderRequests(t *testing.T) {
	threads := stagedPackage(t, "rf-detr", func(w *manifest.Wire) { w.Container.Serve.Env["TT_NUM_THREADS"] = "6" })
	cases := []struct {
		name     string
		pkg      *runner.Package
		opts     Options
		cpu, mem string
	}{
		{"rf-detr", stagedPackage(t, "rf-detr", nil), Options{}, "1", "448Mi"}, // 197 MB + 256 MiB
		{"pi05", stagedPackage(t, "pi05", nil), Options{}, "4", "8960Mi"},      // 7.48 GB × 1.25, four devices
		{"profile threads", threads, Options{}, "6", "448Mi"},
		{"flags", threads, Options{CPU: resource.MustParse("3"), Memory: resource.MustParse("2Gi")}, "3", "2Gi"},
	}
	for _, tc := range cases {
		tc.opts.Registry = testRegistry
		m, err := Render(tc.pkg, tc.opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		r := m.StatefulSet.Spec.Template.Spec.Containers[0].Resources
		cpu, mem, lim := r.Requests[corev1.ResourceCPU], r.Requests[corev1.ResourceMemory], r.Limits[corev1.ResourceMemory]
		if cpu.String() != tc.cpu || mem.String() != tc.mem || lim.String() != tc.mem {
			t.Errorf("%s: cpu %s, memory %s (limit %s); want %s, %s", tc.name, cpu.String(), mem.String(), lim.String(), tc.cpu, tc.mem)
		}
		if _, ok := r.Limits[corev1.ResourceCPU]; ok {
			t.Errorf("%s: a CPU limit would throttle the kernels' threads", tc.name)
		}
	}
}

// TestRenderPodSecurity: the level render reports is what the admission's
// checks say: restricted on a PVC, privileged once a host path is mounted
// (baseline refuses hostPath volumes), with the reason.
func TestRenderPodSecurity(t *testing.T) {
	pkg := stagedPackage(t, "pi05", nil)
	m, err := Render(pkg, Options{Registry: testRegistry})
	if err != nil {
		t.Fatal(err)
	}
	if m.PodSecurity.Level != "restricted" || len(m.PodSecurity.Refused) != 0 {
		t.Errorf("PVC cache: %+v, want restricted", m.PodSecurity)
	}
	m, err = Render(pkg, Options{Registry: testRegistry, CacheHostPath: "/srv/tt-model"})
	if err != nil {
		t.Fatal(err)
	}
	if p := m.PodSecurity; p.Level != "privileged" || len(p.Refused) != 2 || !strings.Contains(p.Refused[1], `baseline refuses hostPath volumes (volume "cache")`) {
		t.Errorf("host-path cache: %+v", p)
	}
}

// --api-key-secret: the server gets the Secret's api-key as a read-only
// file its group reads, named by TT_API_KEY_FILE; the key's value is in no
// env var (nor a secretKeyRef there) and no object; a note says how to
// create the Secret.
func TestRenderAPIKeySecret(t *testing.T) {
	m, err := Render(stagedPackage(t, "rf-detr", nil), Options{Registry: testRegistry, APIKeySecret: "tt-key"})
	if err != nil {
		t.Fatal(err)
	}
	pod := m.StatefulSet.Spec.Template.Spec
	c := pod.Containers[0]
	var file string
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			t.Errorf("env %s comes from a Secret: the key would be in the environment", e.Name)
		}
		if e.Name == "TT_API_KEY_FILE" {
			file = e.Value
		}
	}
	if file != "/run/secrets/tt-model/api-key" {
		t.Errorf("TT_API_KEY_FILE=%q, want /run/secrets/tt-model/api-key", file)
	}
	mounted := false
	for _, vm := range c.VolumeMounts {
		mounted = mounted || (vm.Name == volAPIKey && vm.MountPath == "/run/secrets/tt-model" && vm.ReadOnly)
	}
	var vol *corev1.SecretVolumeSource
	for _, v := range pod.Volumes {
		if v.Name == volAPIKey {
			vol = v.Secret
		}
	}
	if !mounted || vol == nil || vol.SecretName != "tt-key" || *vol.DefaultMode != 0o440 || len(vol.Items) != 1 || vol.Items[0].Key != "api-key" {
		t.Errorf("mounted %v, volume %+v", mounted, vol)
	}
	if !slices.ContainsFunc(m.Notes, func(n string) bool {
		return strings.Contains(n, "kubectl create secret generic tt-key --from-file=api-key=KEYFILE")
	}) {
		t.Errorf("notes %q lack how to create the Secret", m.Notes)
	}
	plain, err := Render(stagedPackage(t, "rf-detr", nil), Options{Registry: testRegistry})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range plain.StatefulSet.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "TT_API_KEY_FILE" {
			t.Error("TT_API_KEY_FILE without --api-key-secret")
		}
	}
}

// TestRenderClaimTemplateOutlivesTheImage: a StatefulSet's claim templates
// cannot change, so a re-packaged image (another digest) must render the
// same ones, or the rolling update to it is refused ("field is immutable",
// seen on the test node before the version label left the template).
func TestRenderClaimTemplateOutlivesTheImage(t *testing.T) {
	other := "sha256:" + strings.Repeat("f", 64)
	a := stagedPackage(t, "rf-detr", nil)
	b := stagedPackage(t, "rf-detr", func(w *manifest.Wire) { w.Container.Image.Digest = other })
	ma, err := Render(a, Options{Registry: testRegistry})
	if err != nil {
		t.Fatal(err)
	}
	mb, err := Render(b, Options{Registry: testRegistry})
	if err != nil {
		t.Fatal(err)
	}
	if ma.StatefulSet.Spec.Template.Labels[labelVersion] == mb.StatefulSet.Spec.Template.Labels[labelVersion] {
		t.Fatal("the two digests render the same version label: the test no longer compares two builds")
	}
	if !reflect.DeepEqual(ma.StatefulSet.Spec.VolumeClaimTemplates, mb.StatefulSet.Spec.VolumeClaimTemplates) {
		t.Errorf("claim templates differ between two builds:\n%+v\n%+v", ma.StatefulSet.Spec.VolumeClaimTemplates, mb.StatefulSet.Spec.VolumeClaimTemplates)
	}
}
