package kube

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	resourcev1client "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ttmodel/tt-model/internal/testing/kubetest"
)

// TestAPIServer runs the cluster-side tests against one real kube-apiserver
// (etcd behind it, no kubelet), each in a namespace of its own.
func TestAPIServer(t *testing.T) {
	srv := kubetest.Run(t)
	t.Run("every profile", func(t *testing.T) { testEveryProfile(t, srv) })
	t.Run("errors", func(t *testing.T) { testApplyErrors(t, srv) })
	t.Run("status and delete", func(t *testing.T) { testStatusAndDelete(t, srv) })
	t.Run("supervisor status", func(t *testing.T) { testStatusReadsSupervisor(t, srv) })
	t.Run("chips", func(t *testing.T) { testChipModes(t, srv) })
	t.Run("pod security", func(t *testing.T) { testPodSecurityAdmission(t, srv) })
	// Last: from here on a scheduler binds every pending pod.
	t.Run("scheduler allocates the chips", func(t *testing.T) { testSchedulerAllocates(t, srv) })
}

// connect is a new connection (with its own warning record) and a new
// namespace holding the service account pods need.
func connect(t *testing.T, srv *kubetest.Server, ns string) *Cluster {
	t.Helper()
	ctx := context.Background()
	cl, err := Connect(ctx, ConnectOptions{Kubeconfig: srv.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	if cl.Namespace != "default" {
		t.Errorf("namespace from the kubeconfig: %q", cl.Namespace)
	}
	if _, err := cl.core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The controller manager would create it; pods are admitted only when
	// their service account exists.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := cl.core.ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return cl
}

// testEveryProfile applies the rendered objects of every profile of both
// packages with server-side apply, first with dryRun=All and then for real
// (twice), requires that the server accepts them without a single warning,
// and reads back what it stored.
func testEveryProfile(t *testing.T, srv *kubetest.Server) {
	ctx := context.Background()
	const ns = "every-profile"
	cl := connect(t, srv, ns)
	for _, model := range models {
		pkg := stagedPackage(t, model, nil)
		for _, prof := range profiles(pkg) {
			t.Run(model+"/"+prof, func(t *testing.T) {
				m, err := Render(pkg, Options{Registry: testRegistry, Profile: prof, Replicas: ptr(int32(2)), Namespace: ns})
				if err != nil {
					t.Fatal(err)
				}
				dry, err := cl.Apply(ctx, m, ApplyOptions{DryRun: true})
				if err != nil {
					t.Fatalf("dry run: %v", err)
				}
				if len(dry) != 5 || dry[1].GetKind() != "ResourceClaimTemplate" || dry[4].GetKind() != "StatefulSet" {
					t.Fatalf("dry run answered %d objects", len(dry))
				}
				if _, err := cl.apps.StatefulSets(ns).Get(ctx, m.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Fatalf("after a dry run the StatefulSet exists (or: %v)", err)
				}
				for range 2 { // the second apply must be a no-op, not a conflict
					if _, err := cl.Apply(ctx, m, ApplyOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				sts, err := cl.apps.StatefulSets(ns).Get(ctx, m.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				checkStored(t, m, sts)
				if sts.Generation != 1 {
					t.Errorf("generation %d after applying the same objects twice, want 1", sts.Generation)
				}
				svc, err := cl.core.Services(ns).Get(ctx, m.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if svc.Spec.ClusterIP == "" || svc.Spec.Ports[0].TargetPort.StrVal != portHTTP || svc.Spec.Ports[0].Port != 8000 {
					t.Errorf("service %s: %+v", svc.Name, svc.Spec)
				}
				if owners := managers(sts); len(owners) != 1 || owners[0] != FieldManager {
					t.Errorf("field managers %v, want only %s", owners, FieldManager)
				}
			})
		}
	}
	if w := cl.Warnings(); len(w) > 0 {
		t.Errorf("the API server sent %d warning(s):\n%s", len(w), strings.Join(w, "\n"))
	}
}

// checkStored compares what the API server stored with what was rendered:
// probes, resources, volumes and the image digest survive defaulting.
func checkStored(t *testing.T, m *Manifests, sts *appsv1.StatefulSet) {
	t.Helper()
	want := m.StatefulSet.Spec.Template.Spec
	got := sts.Spec.Template.Spec
	c, wc := got.Containers[0], want.Containers[0]
	if c.Image != m.Image || !strings.Contains(c.Image, "@"+fakeDigest) {
		t.Errorf("image %q, want %q", c.Image, m.Image)
	}
	if got.InitContainers[0].Image != m.Image {
		t.Errorf("weights job image %q", got.InitContainers[0].Image)
	}
	sp := c.StartupProbe
	if sp == nil || sp.HTTPGet == nil || sp.HTTPGet.Port.StrVal != portStatus ||
		time.Duration(sp.FailureThreshold)*time.Duration(sp.PeriodSeconds)*time.Second != 7*time.Minute {
		t.Errorf("startup probe %+v", sp)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/status" {
		t.Errorf("liveness probe %+v", c.LivenessProbe)
	}
	if rp := c.ReadinessProbe; rp == nil || rp.Exec == nil || rp.Exec.Command[1] != "health" {
		t.Errorf("readiness probe %+v", c.ReadinessProbe)
	}
	for name, q := range wc.Resources.Limits {
		if g := c.Resources.Limits[name]; g.Cmp(q) != 0 {
			t.Errorf("limit %s = %s, want %s", name, g.String(), q.String())
		}
		if g := c.Resources.Requests[name]; g.Cmp(q) != 0 {
			t.Errorf("request %s = %s, want %s", name, g.String(), q.String())
		}
	}
	vols := map[string]corev1.Volume{}
	for _, v := range got.Volumes {
		vols[v.Name] = v
	}
	if v, ok := vols[volHugepages]; ok {
		t.Errorf("tt-model-server computes on the CPU, yet the hugepages are mounted: %+v", v)
	}
	if len(got.ResourceClaims) != 1 || *got.ResourceClaims[0].ResourceClaimTemplateName != m.ClaimTemplate.Name ||
		len(c.Resources.Claims) != 1 || c.Resources.Claims[0].Name != claimName {
		t.Errorf("chip claim: pod %+v, container %+v", got.ResourceClaims, c.Resources.Claims)
	}
	if v := vols[volManifest]; v.ConfigMap == nil || v.ConfigMap.Name != m.ConfigMap.Name {
		t.Errorf("manifest volume %+v", v)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Name != volCache {
		t.Errorf("claim templates %+v", sts.Spec.VolumeClaimTemplates)
	}
	if *got.TerminationGracePeriodSeconds != *want.TerminationGracePeriodSeconds || *got.SecurityContext.RunAsUser != 1000 {
		t.Errorf("grace %d, user %d", *got.TerminationGracePeriodSeconds, *got.SecurityContext.RunAsUser)
	}
}

func managers(obj metav1.Object) []string {
	var out []string
	for _, f := range obj.GetManagedFields() {
		out = append(out, f.Manager)
	}
	return out
}

// testApplyErrors: a conflicting owner, a missing namespace and a
// kubeconfig whose server does not answer are clear errors.
func testApplyErrors(t *testing.T, srv *kubetest.Server) {
	ctx := context.Background()
	const ns = "errors"
	cl := connect(t, srv, ns)
	pkg := stagedPackage(t, "rf-detr", nil)

	m, err := Render(pkg, Options{Registry: testRegistry, Namespace: "absent"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Apply(ctx, m, ApplyOptions{}); err == nil || !strings.Contains(err.Error(), `namespaces "absent" not found`) {
		t.Errorf("missing namespace: %v", err)
	}

	m, err = Render(pkg, Options{Registry: testRegistry, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Apply(ctx, m, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	// Another manager (kubectl scale, say) takes the replica count.
	other := `{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"rf-detr-default"},"spec":{"replicas":3}}`
	if _, err := cl.apps.StatefulSets(ns).Patch(ctx, "rf-detr-default", "application/apply-patch+yaml", []byte(other),
		metav1.PatchOptions{FieldManager: "kubectl", Force: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Apply(ctx, m, ApplyOptions{}); err == nil || !strings.Contains(err.Error(), "--force-conflicts") {
		t.Errorf("conflict: %v", err)
	}
	if _, err := cl.Apply(ctx, m, ApplyOptions{Force: true}); err != nil {
		t.Errorf("forced: %v", err)
	}

	// The warning handler sees what the API server warns about (so "no
	// warnings" above means none were sent): a duplicate host alias IP
	// draws one.
	if n := len(cl.Warnings()); n != 0 {
		t.Fatalf("%d warnings before the duplicate host alias", n)
	}
	dup := `{"spec":{"template":{"spec":{"hostAliases":[{"ip":"10.1.2.3","hostnames":["a"]},{"ip":"10.1.2.3","hostnames":["b"]}]}}}}`
	if _, err := cl.apps.StatefulSets(ns).Patch(ctx, "rf-detr-default", "application/merge-patch+json", []byte(dup),
		metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	if w := cl.Warnings(); len(w) != 1 || !strings.Contains(w[0], "duplicate ip") {
		t.Errorf("warnings %q, want the duplicate host alias IP's", w)
	}

	dead := filepath.Join(t.TempDir(), "kubeconfig")
	data, err := os.ReadFile(srv.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// Same credentials, a port nothing listens on.
	if err := os.WriteFile(dead, []byte(strings.Replace(string(data), srv.URL, "https://127.0.0.1:1", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Connect(ctx, ConnectOptions{Kubeconfig: dead, Timeout: 3 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "the API server https://127.0.0.1:1") || !strings.Contains(err.Error(), "does not answer") || !strings.Contains(err.Error(), dead) {
		t.Errorf("dead server: %v", err)
	}
	_, err = Connect(ctx, ConnectOptions{Kubeconfig: filepath.Join(t.TempDir(), "missing")})
	if err == nil || !strings.Contains(err.Error(), "kubeconfig") {
		t.Errorf("missing kubeconfig: %v", err)
	}
}

// testChipModes: the API server serves resource.k8s.io/v1, so apply's
// default is DRA; it stores the claim template as rendered (device class,
// boardName selector, count), accepts the device-plugin and no-chips
// renders too, and delete removes the template with the rest.
func testChipModes(t *testing.T, srv *kubetest.Server) {
	ctx := context.Background()
	const ns = "chips"
	cl := connect(t, srv, ns)
	mode, err := cl.DefaultChips(ctx)
	if err != nil || mode != ChipsDRA {
		t.Fatalf("DefaultChips = %q, %v; want dra (kube-apiserver 1.37 serves resource.k8s.io/v1)", mode, err)
	}
	pkg := stagedPackage(t, "pi05", nil)
	m, err := Render(pkg, Options{Registry: testRegistry, Namespace: ns, Chips: mode})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Apply(ctx, m, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	u, err := cl.dyn.Resource(claimTemplates).Namespace(ns).Get(ctx, m.Name+"-chips", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req, _, _ := unstructured.NestedSlice(u.Object, "spec", "spec", "devices", "requests")
	if len(req) != 1 {
		t.Fatalf("stored requests %v", req)
	}
	exactly, _, _ := unstructured.NestedMap(req[0].(map[string]any), "exactly")
	sel, _, _ := unstructured.NestedSlice(exactly, "selectors")
	if exactly["deviceClassName"] != "tenstorrent.com" || exactly["count"] != int64(2) || exactly["allocationMode"] != "ExactCount" || len(sel) != 1 ||
		sel[0].(map[string]any)["cel"].(map[string]any)["expression"] != `device.attributes["tenstorrent.com"].boardName == "p300"` {
		t.Errorf("stored request %v", exactly)
	}
	for _, mode := range []string{ChipsDevicePlugin, ChipsNone} {
		o, err := Render(pkg, Options{Registry: testRegistry, Namespace: ns, Chips: mode, Name: "pi05-" + mode})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Apply(ctx, o, ApplyOptions{DryRun: true}); err != nil {
			t.Errorf("%s: %v", mode, err)
		}
	}
	deleted, err := cl.Delete(ctx, ns, m.Name, DeleteOptions{})
	if err != nil || !slices.Contains(deleted, "ResourceClaimTemplate/"+m.Name+"-chips") {
		t.Errorf("delete: %v, %v", deleted, err)
	}
	if w := cl.Warnings(); len(w) > 0 {
		t.Errorf("warnings: %q", w)
	}
}

// testPodSecurityAdmission: the level render reports is the one the API
// server's Pod Security admission enforces. A pod made from the rendered
// template (as the StatefulSet controller makes it) is admitted in a
// namespace enforcing that level and refused in one enforcing the next
// stricter level; the StatefulSet itself draws no warning from warn=level.
func testPodSecurityAdmission(t *testing.T, srv *kubetest.Server) {
	ctx := context.Background()
	cl := connect(t, srv, "pod-security")
	pkg := stagedPackage(t, "rf-detr", nil)
	stricter := map[string]string{"privileged": "baseline", "baseline": "restricted"}
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"pvc", Options{}, "restricted"},
		{"host path", Options{CacheHostPath: "/srv/tt-model"}, "privileged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Registry = testRegistry
			m, err := Render(pkg, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if m.PodSecurity.Level != tc.want {
				t.Fatalf("level %s, want %s", m.PodSecurity.Level, tc.want)
			}
			admits := securityNamespace(t, cl, "psa-"+strings.ReplaceAll(tc.name, " ", "-")+"-"+tc.want, tc.want)
			if _, err := cl.core.Pods(admits).Create(ctx, podOf(m), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Errorf("enforce=%s refused the pod: %v", tc.want, err)
			}
			m.Namespace = admits
			if _, err := cl.Apply(ctx, m, ApplyOptions{DryRun: true}); err != nil {
				t.Fatal(err)
			}
			if w := cl.Warnings(); len(w) > 0 {
				t.Errorf("warn=%s warned: %q", tc.want, w)
			}
			next, ok := stricter[tc.want]
			if !ok {
				return
			}
			refuses := securityNamespace(t, cl, "psa-"+strings.ReplaceAll(tc.name, " ", "-")+"-"+next, next)
			_, err = cl.core.Pods(refuses).Create(ctx, podOf(m), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
				t.Errorf("enforce=%s admitted a %s pod (or: %v)", next, tc.want, err)
			}
		})
	}
}

// securityNamespace is a namespace enforcing and warning at level, with
// the service account pods need.
func securityNamespace(t *testing.T, cl *Cluster, name, level string) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/warn": level,
	}}}
	if _, err := cl.core.Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := cl.core.ServiceAccounts(name).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// podOf is replica 0's pod as the StatefulSet controller would create it:
// the template plus each claim template's volume.
func podOf(m *Manifests) *corev1.Pod {
	tmpl := m.StatefulSet.Spec.Template.DeepCopy()
	name := m.StatefulSet.Name + "-0"
	for _, c := range m.StatefulSet.Spec.VolumeClaimTemplates {
		tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name + "-" + name},
		}})
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}
}

// testSchedulerAllocates: with a real kube-scheduler, a Node object and a
// ResourceSlice published for it as Tenstorrent's DRA driver would (two
// p300 boards and a p150), the claim made from the rendered template gets
// the two p300s and the pod is bound to the node. No controller manager
// runs, so the test makes the pod from the template and the claim from the
// claim template as the StatefulSet and resource-claim controllers would;
// no kubelet runs, so the pod is bound, never started.
func testSchedulerAllocates(t *testing.T, srv *kubetest.Server) {
	kubetest.RunScheduler(t, srv)
	ctx := context.Background()
	const ns, node = "scheduler", "tt-node-1"
	cl := connect(t, srv, ns)
	publishBoards(t, cl, resourceClient(t, srv), node)

	m, err := Render(stagedPackage(t, "pi05", nil), Options{Registry: testRegistry, Namespace: ns, Chips: ChipsDRA, CacheHostPath: "/srv/tt-model"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Apply(ctx, m, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := cl.core.Pods(ns).Create(ctx, podOf(m), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name + "-" + claimName, Namespace: ns,
			Annotations: map[string]string{"resource.kubernetes.io/pod-claim-name": claimName},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
				Controller: ptr(true), BlockOwnerDeletion: ptr(true)}},
		},
		Spec: m.ClaimTemplate.Spec.Spec,
	}
	rc := resourceClient(t, srv)
	if _, err := rc.ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: claimName, ResourceClaimName: ptr(claim.Name)}}
	if _, err := cl.core.Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(90 * time.Second)
	for {
		got, err := cl.core.Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.NodeName != "" {
			if got.Spec.NodeName != node {
				t.Fatalf("bound to %q", got.Spec.NodeName)
			}
			break
		}
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(filepath.Join(srv.Dir, "kube-scheduler.log"))
			if len(data) > 4000 {
				data = data[len(data)-4000:]
			}
			t.Fatalf("pod not bound after 90 s; conditions %+v\n--- kube-scheduler.log (end)\n%s", got.Status.Conditions, data)
		}
		time.Sleep(250 * time.Millisecond)
	}
	got, err := rc.ResourceClaims(ns).Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := got.Status.Allocation
	if a == nil || len(a.Devices.Results) != 2 {
		t.Fatalf("allocation %+v", a)
	}
	var devices []string
	for _, r := range a.Devices.Results {
		if r.Driver != "tenstorrent.com" || r.Pool != node || r.Request != claimName {
			t.Errorf("result %+v", r)
		}
		devices = append(devices, r.Device)
	}
	slices.Sort(devices)
	if !slices.Equal(devices, []string{"board-0", "board-1"}) {
		t.Errorf("allocated %v, want the two p300 boards", devices)
	}
	if len(got.Status.ReservedFor) != 1 || got.Status.ReservedFor[0].Name != pod.Name {
		t.Errorf("reserved for %+v", got.Status.ReservedFor)
	}
}

// publishBoards creates what a node running Tenstorrent's DRA driver has:
// the Node (ready, room for the pod), the tenstorrent.com DeviceClass, and
// the node's ResourceSlice with two p300 boards and a p150, one device per
// board with the attributes the driver publishes.
func publishBoards(t *testing.T, cl *Cluster, rc resourcev1client.ResourceV1Interface, node string) {
	t.Helper()
	ctx := context.Background()
	n, err := cl.core.Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"kubernetes.io/hostname": node}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The API server's TaintNodesByCondition admission taints a new node
	// not-ready; the node lifecycle controller that would lift it once the
	// kubelet reports does not run here.
	n.Spec.Taints = nil
	if n, err = cl.core.Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	room := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")}
	n.Status.Capacity, n.Status.Allocatable = room, room
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := cl.core.Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "tenstorrent.com"},
		Spec:       resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "tenstorrent.com"`}}}},
	}
	if _, err := rc.DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	board := func(name, boardName string, chips int64) resourcev1.Device {
		return resourcev1.Device{Name: name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"boardName": {StringValue: ptr(boardName)}, "chipArch": {StringValue: ptr("blackhole")}, "chipCount": {IntValue: ptr(chips)},
		}}
	}
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-tenstorrent.com"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: "tenstorrent.com", NodeName: ptr(node),
			Pool:    resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{board("board-0", "p300", 2), board("board-1", "p300", 2), board("board-2", "p150", 1)},
		},
	}
	if _, err := rc.ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// resourceClient is a client of resource.k8s.io/v1 on srv (Cluster keeps
// none: tt-model itself only applies the claim template).
func resourceClient(t *testing.T, srv *kubetest.Server) resourcev1client.ResourceV1Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", srv.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := resourcev1client.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}
