package kube

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ttmodel/tt-model/manifest"
)

// How the pod gets its chips (Options.Chips).
const (
	// ChipsDRA asks Tenstorrent's DRA driver for the boards: a
	// ResourceClaimTemplate per instance, one claim per pod.
	ChipsDRA = "dra"
	// ChipsDevicePlugin asks a device plugin for the chips as an extended
	// resource (tenstorrent.com/<board or architecture>).
	ChipsDevicePlugin = "device-plugin"
	// ChipsNone requests no chips (a CPU-only node, or chips handed out some
	// other way).
	ChipsNone = "none"
)

// ChipModes are the values of Options.Chips, for messages.
func ChipModes() []string { return []string{ChipsDRA, ChipsDevicePlugin, ChipsNone} }

// draDriver is the name Tenstorrent's DRA driver publishes its devices
// under: the DeviceClass, and the attribute domain of boardName.
const draDriver = "tenstorrent.com"

// claimName is the pod's name for its chip claim and the container's
// reference to it.
const claimName = "chips"

// ChipResourceFor is the extended resource a Tenstorrent device plugin
// registers for a profile's hardware label. The plugin reads each chip's
// card type from sysfs and registers one device per /dev/tenstorrent/N, so
// the resource counts chips, not boards (a p300 is two): Wormhole per card
// (n150, n300), Blackhole and Grayskull per architecture.
func ChipResourceFor(hardware string) (string, error) {
	h, err := manifest.ParseHardware(hardware)
	if err != nil {
		return "", fmt.Errorf("hardware: %w; name a resource with --chip-resource (or --chips %s)", err, ChipsNone)
	}
	if h.Arch == manifest.ArchWormhole {
		return draDriver + "/" + h.Board, nil
	}
	return draDriver + "/" + h.Arch, nil
}

// chipRequest is how one pod asks for its profile's chips.
type chipRequest struct {
	mode     string // ChipsDRA, ChipsDevicePlugin or ChipsNone
	resource string // the device plugin's extended resource
	board    string // the DRA selector's boardName
	count    int64  // device-plugin: chips; DRA: boards (the driver publishes one device per board)
}

// chipsFor is the request for a profile under the options: o.Chips ("" = DRA),
// o.ChipResource naming the device plugin's resource (and implying
// device-plugin) or, as "none", no chips.
func chipsFor(p manifest.Profile, o Options) (chipRequest, error) {
	mode := o.Chips
	switch {
	case o.ChipResource == NoChipResource:
		if mode != "" && mode != ChipsNone {
			return chipRequest{}, fmt.Errorf("--chip-resource %s contradicts --chips %s", NoChipResource, mode)
		}
		mode = ChipsNone
	case o.ChipResource != "":
		if mode == "" {
			mode = ChipsDevicePlugin
		}
		if mode != ChipsDevicePlugin {
			return chipRequest{}, fmt.Errorf("--chip-resource %s names a device-plugin resource, but --chips is %s", o.ChipResource, mode)
		}
	case mode == "":
		mode = ChipsDRA
	}
	if mode == ChipsNone {
		return chipRequest{mode: ChipsNone}, nil
	}
	if mode != ChipsDRA && mode != ChipsDevicePlugin {
		return chipRequest{}, fmt.Errorf("--chips %q: want one of %s", mode, strings.Join(ChipModes(), ", "))
	}
	h, err := manifest.ParseHardware(p.Hardware)
	if mode == ChipsDevicePlugin && o.ChipResource != "" {
		// A named resource works for a board the grammar does not know:
		// one chip unless the label says more.
		n := int64(1)
		if err == nil {
			n = int64(h.Chips())
		}
		return chipRequest{mode: mode, resource: o.ChipResource, count: n}, nil
	}
	if err != nil {
		return chipRequest{}, fmt.Errorf("profile %s: hardware: %w; give --chips %s to request no chips", p.Name, err, ChipsNone)
	}
	if mode == ChipsDRA {
		return chipRequest{mode: mode, board: h.Board, count: int64(h.Boards)}, nil
	}
	res, err := ChipResourceFor(p.Hardware)
	if err != nil {
		return chipRequest{}, fmt.Errorf("profile %s: %w", p.Name, err)
	}
	return chipRequest{mode: mode, resource: res, count: int64(h.Chips())}, nil
}

// claimTemplate is the instance's ResourceClaimTemplate: each pod's claim
// asks the DRA driver for count boards of the profile's family, matched on
// the boardName attribute the driver publishes for every device.
func claimTemplate(meta metav1.ObjectMeta, c chipRequest) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: resourcev1.SchemeGroupVersion.String(), Kind: "ResourceClaimTemplate"},
		ObjectMeta: meta,
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{
				Name: claimName,
				Exactly: &resourcev1.ExactDeviceRequest{
					DeviceClassName: draDriver,
					Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
						Expression: fmt.Sprintf(`device.attributes[%q].boardName == %q`, draDriver, c.board),
					}}},
					AllocationMode: resourcev1.DeviceAllocationModeExactCount,
					Count:          c.count,
				},
			}},
		}}},
	}
}

// podClaims are the pod's resourceClaims: the chip claim made from the
// instance's template.
func podClaims(template string) []corev1.PodResourceClaim {
	return []corev1.PodResourceClaim{{Name: claimName, ResourceClaimTemplateName: ptr(template)}}
}
