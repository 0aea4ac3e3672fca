package kube

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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

	ConfigMap   *corev1.ConfigMap   // the package's tt_kernel_manifest.json, for the weights job
	Service     *corev1.Service     // the server's port, for clients
	PodService  *corev1.Service     // headless: each replica's DNS name (the StatefulSet's serviceName)
	StatefulSet *appsv1.StatefulSet // the replicas

	// Notes are what the user should know about the render (printed on
	// stderr), e.g. an image reference no registry serves.
	Notes []string
}

// Objects are the manifests in the order they are applied.
func (m *Manifests) Objects() []runtime.Object {
	return []runtime.Object{m.ConfigMap, m.Service, m.PodService, m.StatefulSet}
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
	image, note, err := imageRef(pkg, opts.Registry)
	if err != nil {
		return nil, err
	}
	chipName, chips, err := chipRequest(prof, opts.ChipResource)
	if err != nil {
		return nil, err
	}
	manifestJSON, err := json.MarshalIndent(w, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", manifest.WireFile, err)
	}
	m := &Manifests{Name: name, Namespace: opts.Namespace, Profile: prof, Image: image}
	if note != "" {
		m.Notes = append(m.Notes, note)
	}
	if opts.APIKeySecret != "" {
		if w.Container.Kind != manifest.KindGoServer {
			return nil, fmt.Errorf("--api-key-secret: a %s package's server does not read tt-model-server's key file; set its own option in the profile", w.Container.Kind)
		}
		m.Notes = append(m.Notes, fmt.Sprintf("the server requires the API key in Secret %s (key %s); create it with: kubectl create secret generic %s --from-file=%s=KEYFILE",
			opts.APIKeySecret, apiKeySecretKey, opts.APIKeySecret, apiKeySecretKey))
	}
	if chips > 0 && opts.ResetCmd == "" && w.Container.Runtime["base"] == "scratch" {
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
	pod, err := podSpec(podInput{
		pkg: pkg, prof: prof, launch: launch, name: name, image: image,
		chipResource: chipName, chips: chips, opts: opts,
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
		sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{cacheClaim(opts, labels)}
	}
	m.StatefulSet = sts
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
// the registry being --registry or the manifest's image.registry. A package
// published to the Hub ("hf") names no registry a node can pull from: the
// pod then uses the name `tt-model serve` loads it under, and a note says so.
func imageRef(pkg *runner.Package, registry string) (ref, note string, err error) {
	img := pkg.Wire.Container.Image
	if img.Digest == "" {
		return "", "", fmt.Errorf("%s: container.image.digest is empty: the package has no built image to run; stage it with `tt-model package`", pkg.Path)
	}
	if !digestRE.MatchString(img.Digest) {
		return "", "", fmt.Errorf("%s: container.image.digest %q is not a sha256 digest", pkg.Path, img.Digest)
	}
	registry = strings.TrimSuffix(registry, "/")
	if registry == "" {
		registry = img.Registry
	}
	if registry == "" || registry == "hf" {
		repo := localRepository(img.Tag, pkg.Wire.Name)
		ref = repo + "@" + img.Digest
		return ref, fmt.Sprintf("image.registry is %q, which no node can pull from: the pod runs %s, the name `tt-model serve` loads the image under. "+
			"Load it onto the nodes, or push it (tt-model push --registry HOST/NS) and render with --registry HOST/NS.", img.Registry, ref), nil
	}
	repository := img.Repository
	if repository == "" {
		repository = pkg.Wire.Name
	}
	return registry + "/" + repository + "@" + img.Digest, "", nil
}

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
