package kube

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/runner"
)

// maxNameLen keeps a StatefulSet's pod names labelable: the controller
// labels each pod with <name>-<10-char hash>, and a label value is at most
// 63 characters.
const maxNameLen = 52

// Manifests are the objects of one deployment of a package profile.
type Manifests struct {
	Name      string
	Namespace string // "" when rendered without one
	Profile   manifest.Profile
	Image     string // the pod's image reference, by digest

	ConfigMap *corev1.ConfigMap // the package's tt_kernel_manifest.json, for the weights job
	// ClaimTemplate is each pod's chip claim under DRA (nil otherwise).
	ClaimTemplate *resourcev1.ResourceClaimTemplate
	Service       *corev1.Service     // the server's port, for clients
	PodService    *corev1.Service     // headless: each replica's DNS name (the StatefulSet's serviceName)
	StatefulSet   *appsv1.StatefulSet // the replicas

	// Chips is how the pods get their chips: ChipsDRA, ChipsDevicePlugin
	// or ChipsNone.
	Chips string
	// PodSecurity is the strictest Pod Security Standard the pods meet.
	PodSecurity PodSecurity

	// Notes are what the user should know about the render (printed on
	// stderr), e.g. an image without the chip reset.
	Notes []string
}

// Objects are the manifests in the order they are applied: the claim
// template before the StatefulSet whose pods name it.
func (m *Manifests) Objects() []runtime.Object {
	objs := []runtime.Object{m.ConfigMap}
	if m.ClaimTemplate != nil {
		objs = append(objs, m.ClaimTemplate)
	}
	return append(objs, m.Service, m.PodService, m.StatefulSet)
}

// Render turns a staged package into its Kubernetes objects.
func Render(pkg *runner.Package, opts Options) (*Manifests, error) {
	opts = opts.Defaults()
	if err := opts.check(); err != nil {
		return nil, err
	}
	if pkg.Dir == "" {
		return nil, fmt.Errorf("%s is an authored manifest: render needs a staged package (build/<name>/ from `tt-model package --container %s`)", pkg.Path, pkg.Path)
	}
	w := pkg.Wire
	if w.Container == nil {
		return nil, fmt.Errorf("%s: no container block: not a container package", pkg.Path)
	}
	prof, launch, err := pkg.Launch(opts.Profile)
	if err != nil {
		return nil, err
	}
	name := opts.Name
	if name == "" {
		name = w.Name + "-" + prof.Name
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	image, err := imageRef(pkg, opts.Registry, opts.ImageName)
	if err != nil {
		return nil, err
	}
	chips, err := chipsFor(prof, opts)
	if err != nil {
		return nil, err
	}
	opts, needsNote := defaultRequests(w, prof, launch, opts)
	manifestJSON, err := json.MarshalIndent(w, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", manifest.WireFile, err)
	}
	m := &Manifests{Name: name, Namespace: opts.Namespace, Profile: prof, Image: image, Chips: chips.mode}
	if needsNote != "" {
		m.Notes = append(m.Notes, needsNote)
	}
	if opts.APIKeySecret != "" {
		if w.Container.Kind != manifest.KindGoServer {
			return nil, fmt.Errorf("--api-key-secret: a %s package's server does not read tt-model-server's key file; set its own option in the profile", w.Container.Kind)
		}
		m.Notes = append(m.Notes, fmt.Sprintf("the server requires the API key in Secret %s (key %s); create it with: kubectl create secret generic %s --from-file=%s=KEYFILE",
			opts.APIKeySecret, apiKeySecretKey, opts.APIKeySecret, apiKeySecretKey))
	}
	if chips.mode != ChipsNone && opts.ResetCmd == "" && w.Container.Runtime["base"] == "scratch" {
		m.Notes = append(m.Notes, "the image is built on scratch and carries no tt-smi, the supervisor's default chip reset: "+
			"after a hang the reset fails and the container restarts; build on a base with tt-smi (runtime.base) or name a reset with --reset-cmd")
	}
	labels := objectLabels(w, prof, name, image)
	selector := map[string]string{labelName: w.Name, labelInstance: name}
	meta := func(objName string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: objName, Namespace: opts.Namespace, Labels: labels}
	}

	m.ConfigMap = &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(name + "-manifest"),
		Data:       map[string]string{manifest.WireFile: string(manifestJSON) + "\n"},
	}
	m.Service = &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(name),
		Spec: corev1.ServiceSpec{
			Selector: selector,
			Ports:    []corev1.ServicePort{servicePort(portHTTP, int32(launch.Port))},
		},
	}
	m.PodService = &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(name + "-pods"),
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  selector,
			// A replica is addressable during its long start, e.g. to read
			// its supervisor's status.
			PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{
				servicePort(portHTTP, int32(launch.Port)),
				servicePort(portStatus, opts.StatusPort),
			},
		},
	}
	if chips.mode == ChipsDRA {
		m.ClaimTemplate = claimTemplate(meta(claimTemplateName(name)), chips)
	}
	pod, err := podSpec(podInput{
		pkg: pkg, prof: prof, launch: launch, name: name, image: image,
		chips: chips, opts: opts,
	})
	if err != nil {
		return nil, err
	}
	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: meta(name),
		Spec: appsv1.StatefulSetSpec{
			Replicas:    opts.Replicas,
			ServiceName: m.PodService.Name,
			Selector:    &metav1.LabelSelector{MatchLabels: selector},
			// Each replica's start may take the whole start timeout: start
			// them together, not one after the other.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: podAnnotations(w)},
				Spec:       pod,
			},
		},
	}
	if opts.CacheHostPath == "" {
		// A StatefulSet's claim templates are immutable: their labels leave
		// out the version (the image digest), or every re-packaged image's
		// rolling update would be refused by the API server.
		claimLabels := maps.Clone(labels)
		delete(claimLabels, labelVersion)
		sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{cacheClaim(opts, claimLabels)}
	}
	m.StatefulSet = sts
	if m.PodSecurity, err = podSecurityOf(&sts.Spec.Template.ObjectMeta, &sts.Spec.Template.Spec); err != nil {
		return nil, err
	}
	return m, nil
}

// Label keys.
const (
	labelName      = "app.kubernetes.io/name"
	labelInstance  = "app.kubernetes.io/instance"
	labelComponent = "app.kubernetes.io/component"
	labelVersion   = "app.kubernetes.io/version"
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelPartOf    = "app.kubernetes.io/part-of"
)

// objectLabels are the recommended app.kubernetes.io labels plus the ones
// `tt-model serve` puts on its containers (package and profile).
func objectLabels(w *manifest.Wire, prof manifest.Profile, name, image string) map[string]string {
	return map[string]string{
		labelName:           w.Name,
		labelInstance:       name,
		labelComponent:      "model-server",
		labelPartOf:         "tt-model",
		labelManagedBy:      FieldManager,
		labelVersion:        digestVersion(image),
		runner.LabelName:    w.Name,
		runner.LabelProfile: prof.Name,
	}
}

// podAnnotations carry what does not fit a label value: the weights pin and
// the image's tag.
func podAnnotations(w *manifest.Wire) map[string]string {
	a := map[string]string{annotationImageTag: w.Container.Image.Tag}
	if w.Weights != nil && w.Weights.Repo != "" {
		pin := w.Weights.Repo
		if w.Weights.Revision != nil && *w.Weights.Revision != "" {
			pin += "@" + *w.Weights.Revision
		}
		a[annotationWeights] = pin
	}
	return a
}

const (
	annotationWeights  = runner.LabelName + ".weights"
	annotationImageTag = runner.LabelName + ".image-tag"
)

// digestVersion is the first 12 hex digits of the image digest: it names
// the build exactly and fits a label value.
func digestVersion(image string) string {
	_, digest, _ := strings.Cut(image, "@sha256:")
	if len(digest) > 12 {
		digest = digest[:12]
	}
	return digest
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// imageRef is the package's image by digest: <registry>/<repository>@<digest>,
// the registry being --registry or the manifest's image.registry, or
// --image-name. A package published to the Hub ("hf") or never pushed names
// no registry a node can pull from, so without --registry or --image-name
// the render is refused rather than handing the kubelet a reference that
// would only ever end in ImagePullBackOff.
func imageRef(pkg *runner.Package, registry, imageName string) (string, error) {
	img := pkg.Wire.Container.Image
	if img.Digest == "" {
		return "", fmt.Errorf("%s: container.image.digest is empty: the package has no built image to run; stage it with `tt-model package`", pkg.Path)
	}
	if !digestRE.MatchString(img.Digest) {
		return "", fmt.Errorf("%s: container.image.digest %q is not a sha256 digest", pkg.Path, img.Digest)
	}
	if imageName != "" {
		if registry != "" {
			return "", fmt.Errorf("--image-name and --registry both name the image: give one")
		}
		if strings.Contains(imageName, "@") {
			return "", fmt.Errorf("--image-name %q: give the name without a digest; the package's %s is appended", imageName, img.Digest)
		}
		return imageName + "@" + img.Digest, nil
	}
	registry = strings.TrimSuffix(registry, "/")
	if registry == "" {
		registry = img.Registry
	}
	if registry == "" || registry == "hf" {
		return "", fmt.Errorf("%s: image.registry is %q, which no node can pull from: push the image (tt-model push --registry HOST/NS) and render with --registry HOST/NS, "+
			"or load it onto the nodes and name it with --image-name (e.g. --image-name %s)", pkg.Path, img.Registry, localRepository(img.Tag, pkg.Wire.Name))
	}
	repository := img.Repository
	if repository == "" {
		repository = pkg.Wire.Name
	}
	return registry + "/" + repository + "@" + img.Digest, nil
}

// claimTemplateName is the instance's ResourceClaimTemplate.
func claimTemplateName(name string) string { return name + "-" + claimName }

// localRepository is the repository part of the image's local tag
// ("tt-model/rf-detr:abc…" → "tt-model/rf-detr"), else tt-model/<name>.
func localRepository(tag, name string) string {
	if i := strings.LastIndex(tag, ":"); i > strings.LastIndex(tag, "/") {
		tag = tag[:i]
	}
	if tag == "" {
		return "tt-model/" + name
	}
	return tag
}

// checkName refuses a name Kubernetes would refuse for the Service or the
// StatefulSet's pods, with the reason.
func checkName(name string) error {
	if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
		return fmt.Errorf("name %q: %s (set one with --name)", name, strings.Join(errs, "; "))
	}
	if len(name) > maxNameLen {
		return fmt.Errorf("name %q is %d characters; a StatefulSet's name must be at most %d (set one with --name)", name, len(name), maxNameLen)
	}
	return nil
}

// Port names.
const (
	portHTTP   = "http"
	portStatus = "status"
)

func servicePort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: intOrName(name), Protocol: corev1.ProtocolTCP}
}

// seconds rounds d up to whole seconds (probe and grace fields are seconds).
func seconds(d time.Duration) int64 {
	return int64(math.Ceil(d.Seconds()))
}
