package kube

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/ttmodel/tt-model/manifest"
)

// deviceClasses maps a board family to the extended resource Tenstorrent's
// Kubernetes device plugin registers for it. The plugin reads each chip's
// tt_card_type from sysfs (p150a, p300c, n300l, …) and registers one
// resource per class, one device per /dev/tenstorrent/N, so a resource
// counts chips, not boards: a p300 board is two.
var deviceClasses = map[string]string{
	"p100": "tenstorrent.com/blackhole",
	"p150": "tenstorrent.com/blackhole",
	"p300": "tenstorrent.com/blackhole",
	"n150": "tenstorrent.com/n150",
	"n300": "tenstorrent.com/n300",
	"e75":  "tenstorrent.com/grayskull",
	"e150": "tenstorrent.com/grayskull",
}

// boardRE reads the board family of a hardware label: "p300x2" → p300,
// "p150a" → p150.
var boardRE = regexp.MustCompile(`^([a-z]\d+)[a-z]?(?:x\d+)?$`)

// ChipResourceFor is the device plugin's resource for a profile's hardware
// label, or an error naming the label when no class is known for it.
func ChipResourceFor(hardware string) (string, error) {
	m := boardRE.FindStringSubmatch(strings.ToLower(strings.TrimSpace(hardware)))
	if m != nil {
		if r, ok := deviceClasses[m[1]]; ok {
			return r, nil
		}
	}
	return "", fmt.Errorf("hardware %q: no Tenstorrent device-plugin resource is known for it; name one with --chip-resource (or --chip-resource %s)", hardware, NoChipResource)
}

// chipRequest is the resource name and chip count a profile asks for; an
// empty name means no chips are requested.
func chipRequest(p manifest.Profile, override string) (string, int64, error) {
	if override == NoChipResource {
		return "", 0, nil
	}
	n, ok := manifest.ChipCount(p.Hardware)
	if !ok || n < 1 {
		if override == "" {
			return "", 0, fmt.Errorf("profile %s: hardware %q does not say how many chips it uses; give --chip-resource %s to request none", p.Name, p.Hardware, NoChipResource)
		}
		n = 1
	}
	name := override
	if name == "" {
		var err error
		if name, err = ChipResourceFor(p.Hardware); err != nil {
			return "", 0, fmt.Errorf("profile %s: %w", p.Name, err)
		}
	}
	return name, int64(n), nil
}
