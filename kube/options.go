// Package kube turns a staged package into Kubernetes objects (a StatefulSet
// running `tt-model supervise` as PID 1, its Services and the package's
// manifest as a ConfigMap) and applies, deletes and inspects them with
// client-go. Render is pure: the same package and options give the same
// objects, byte for byte once encoded.
package kube

import (
	"fmt"
	"net/url"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/ttmodel/tt-model/supervisor"
)

// FieldManager owns every field tt-model applies (server-side apply).
const FieldManager = "tt-model"

// NoChipResource as Options.ChipResource leaves the chips out of the pod's
// resources, as Options.Chips = ChipsNone does.
const NoChipResource = ChipsNone

// DefaultStatusPort is where the supervisor serves its status JSON in the pod.
const DefaultStatusPort = 9100

// Options are the render flags. The zero value of a field means its default
// (Defaults fills them), so callers set only what the user gave.
type Options struct {
	Profile   string // "" = the package's default profile
	Name      string // "" = <package>-<profile>
	Namespace string // "" = none in the objects (kubectl and apply choose)
	Replicas  *int32 // nil = 1

	// Registry is HOST[/NAMESPACE] the image was pushed to, as `tt-model
	// push --registry`; "" = the manifest's image.registry.
	Registry string
	// ImageName is the image's name on the nodes (loaded there by hand, or
	// pushed outside tt-model), used instead of a registry; the package's
	// digest is appended.
	ImageName string

	// Chips is how the pod asks for its chips: ChipsDRA (also ""),
	// ChipsDevicePlugin or ChipsNone. `k8s apply` fills "" from the API
	// server: DRA where it serves resource.k8s.io/v1.
	Chips string
	// ChipResource is the extended resource the chips are requested as
	// under ChipsDevicePlugin (setting it implies that mode); "" = the name
	// Tenstorrent's device plugin advertises for the profile's hardware
	// (ChipResourceFor); NoChipResource = no chips, as ChipsNone.
	ChipResource string
	// NoHugepages leaves out the host's /dev/hugepages-1G, which is
	// mounted when the profile's server drives chips itself (tt-metal's
	// host memory; not tt-model-server, which computes on the CPU).
	NoHugepages bool

	StartTimeout time.Duration // the supervisor's --start-timeout
	StopGrace    time.Duration // the supervisor's --stop-grace
	ResetCmd     string        // the supervisor's --reset-cmd; "" = its default
	StatusPort   int32

	// CacheHostPath puts the HF cache, the kernel cache and the hang
	// marker on this host directory instead of a PVC per replica.
	CacheHostPath string
	CacheSize     resource.Quantity // the PVC's request
	StorageClass  string            // "" = the cluster's default class

	// HFTokenSecret names a Secret whose key HF_TOKEN the weights job reads
	// (gated or private weights).
	HFTokenSecret string
	// HFEndpoint is the Hub the weights job pulls from (HF_ENDPOINT, as
	// huggingface_hub reads it: a mirror or a private Hub); "" = the
	// public Hub. check refuses anything but an http(s) URL without
	// userinfo (a token belongs in HFTokenSecret), query or fragment.
	HFEndpoint string

	// APIKeySecret names a Secret whose key "api-key" holds the API key
	// tt-model-server then requires (mounted as a file, TT_API_KEY_FILE;
	// never in the pod's env or args). The Secret is the operator's: render
	// never writes the key into the objects.
	APIKeySecret string

	CPU    resource.Quantity // requests.cpu; zero = none
	Memory resource.Quantity // requests.memory and limits.memory; zero = none
}

// Defaults fills the fields left at their zero value.
func (o Options) Defaults() Options {
	d := supervisor.Defaults(8000)
	if o.Replicas == nil {
		o.Replicas = ptr(int32(1))
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = d.StartTimeout
	}
	if o.StopGrace == 0 {
		o.StopGrace = d.StopGrace
	}
	if o.StatusPort == 0 {
		o.StatusPort = DefaultStatusPort
	}
	if o.CacheSize.IsZero() {
		o.CacheSize = resource.MustParse("50Gi")
	}
	return o
}

// check refuses values Kubernetes or the supervisor would refuse later,
// naming the flag.
func (o Options) check() error {
	if *o.Replicas < 0 {
		return fmt.Errorf("--replicas %d: want 0 or more", *o.Replicas)
	}
	if o.StartTimeout < probePeriod || o.StartTimeout%probePeriod != 0 {
		// The startup probe's budget is failureThreshold × period: only a
		// whole number of periods makes it equal to the start timeout.
		return fmt.Errorf("--start-timeout %s: want a positive multiple of %s, the startup probe's period", o.StartTimeout, probePeriod)
	}
	if o.StopGrace < time.Second {
		return fmt.Errorf("--stop-grace %s: want at least 1s", o.StopGrace)
	}
	if o.StatusPort < 1 || o.StatusPort > 65535 {
		return fmt.Errorf("--status-port %d: want 1-65535", o.StatusPort)
	}
	if o.CacheSize.Sign() <= 0 {
		return fmt.Errorf("--cache-size %s: want a positive size", o.CacheSize.String())
	}
	if o.HFEndpoint != "" {
		u, err := url.Parse(o.HFEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("--hf-endpoint %q: want an http(s) URL such as https://hf-mirror.example, without credentials (use --hf-token-secret), query or fragment", o.HFEndpoint)
		}
	}
	if o.CPU.Sign() < 0 || o.Memory.Sign() < 0 {
		return fmt.Errorf("--cpu/--memory: want positive quantities")
	}
	return nil
}
