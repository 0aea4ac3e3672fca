package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/ttmodel/tt-model/manifest"
)

// TestRenderChips: each --chips mode asks for the profile's hardware its own
// way: DRA boards of the family by boardName, the device plugin chips as
// the extended resource, none nothing; and when Kubernetes hands out the
// chips, the profile's host-side TT_METAL_VISIBLE_DEVICES is not passed on.
func TestRenderChips(t *testing.T) {
	cases := []struct {
		model, mode string
		selector    string // DRA's CEL expression
		boards      int64
		resource    string // device plugin
		chips       int64
	}{
		{"rf-detr", ChipsDRA, `device.attributes["tenstorrent.com"].boardName == "p150"`, 1, "", 0},
		{"pi05", ChipsDRA, `device.attributes["tenstorrent.com"].boardName == "p300"`, 2, "", 0},
		{"rf-detr", ChipsDevicePlugin, "", 0, "tenstorrent.com/blackhole", 1},
		{"pi05", ChipsDevicePlugin, "", 0, "tenstorrent.com/blackhole", 4},
		{"rf-detr", ChipsNone, "", 0, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.model+"/"+tc.mode, func(t *testing.T) {
			m, err := Render(stagedPackage(t, tc.model, nil), Options{Registry: testRegistry, Chips: tc.mode})
			if err != nil {
				t.Fatal(err)
			}
			pod := m.StatefulSet.Spec.Template.Spec
			c := pod.Containers[0]
			if m.Chips != tc.mode {
				t.Errorf("mode %q, want %q", m.Chips, tc.mode)
			}
			if tc.selector != "" {
				ct := m.ClaimTemplate
				if ct == nil {
					t.Fatal("no claim template")
				}
				r := ct.Spec.Spec.Devices.Requests[0].Exactly
				if r.DeviceClassName != "tenstorrent.com" || len(r.Selectors) != 1 || r.Selectors[0].CEL.Expression != tc.selector || r.Count != tc.boards {
					t.Errorf("claim request %+v", r)
				}
				objs := m.Objects()
				if len(objs) != 5 || objs[1] != ct {
					t.Errorf("objects %d, the claim template not second", len(objs))
				}
			} else if m.ClaimTemplate != nil || len(pod.ResourceClaims) != 0 || len(c.Resources.Claims) != 0 {
				t.Errorf("%s: claims rendered", tc.mode)
			}
			for name, q := range c.Resources.Limits {
				if name == corev1.ResourceMemory {
					continue
				}
				if string(name) != tc.resource || q.Value() != tc.chips || !q.Equal(c.Resources.Requests[name]) {
					t.Errorf("limit %s = %s, want %s = %d", name, q.String(), tc.resource, tc.chips)
				}
			}
			if _, ok := c.Resources.Limits[corev1.ResourceName(tc.resource)]; tc.resource != "" && !ok {
				t.Errorf("no limit %s: %v", tc.resource, c.Resources.Limits)
			}
			v, ok := envOf(c)[visibleDevicesEnv]
			if tc.model == "rf-detr" && (ok != (tc.mode == ChipsNone) || (ok && v != "0")) {
				t.Errorf("%s: %s=%q (set %v)", tc.mode, visibleDevicesEnv, v, ok)
			}
		})
	}
}

// TestHardwareResources: the device plugin's resource and the DRA board for
// each board family of the one hardware grammar (manifest.ParseHardware).
func TestHardwareResources(t *testing.T) {
	cases := map[string]string{
		"p150": "tenstorrent.com/blackhole", "p150a": "tenstorrent.com/blackhole", "P300x2": "tenstorrent.com/blackhole",
		"p100": "tenstorrent.com/blackhole", "n150": "tenstorrent.com/n150", "n300x4": "tenstorrent.com/n300",
		"e75": "tenstorrent.com/grayskull", "e150": "tenstorrent.com/grayskull",
	}
	for hw, want := range cases {
		if got, err := ChipResourceFor(hw); err != nil || got != want {
			t.Errorf("ChipResourceFor(%q) = %q, %v; want %q", hw, got, err, want)
		}
	}
	if _, err := ChipResourceFor("q900"); err == nil {
		t.Error("q900 has a resource")
	}
}

// TestHugepagesOnlyWhenDriven: the host's hugepages are mounted only for a
// server that opens the chips itself (tt-metal's kinds), not for
// tt-model-server, which computes on the CPU, and never without chips.
func TestHugepagesOnlyWhenDriven(t *testing.T) {
	dra := chipRequest{mode: ChipsDRA}
	for _, tc := range []struct {
		kind  string
		chips chipRequest
		want  bool
	}{
		{manifest.KindGoServer, dra, false},
		{"vllm-plugin", dra, true},
		{"vllm-plugin", chipRequest{mode: ChipsNone}, false},
	} {
		if got := drivesChips(tc.kind, tc.chips); got != tc.want {
			t.Errorf("drivesChips(%s, %s) = %v", tc.kind, tc.chips.mode, got)
		}
	}
}
