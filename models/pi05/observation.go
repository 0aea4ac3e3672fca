package pi05

import (
	"fmt"
	"slices"
	"strings"
)

// Robot clients name their cameras after the robot, not after the policy's image features. These are
// the observation keys of openpi's example robots (policies/{libero,droid,aloha}_policy.py), each with
// the pi0.5 camera slot openpi's input transform puts it in: slot 0 is the base camera
// (base_0_rgb), 1 the left wrist, 2 the right wrist. ALOHA's frames sit in an "images" map (written
// "images/<name>" here) and arrive channels first; its cam_low is not a pi0.5 input (openpi drops it).
var robotCameraKeys = []CameraKey{
	{Family: "libero", Key: "observation/image", Slot: 0},
	{Family: "libero", Key: "observation/wrist_image", Slot: 1},
	{Family: "droid", Key: "observation/exterior_image_1_left", Slot: 0},
	{Family: "droid", Key: "observation/wrist_image_left", Slot: 1},
	{Family: "aloha", Key: "images/cam_high", Slot: 0, ChannelsFirst: true},
	{Family: "aloha", Key: "images/cam_left_wrist", Slot: 1, ChannelsFirst: true},
	{Family: "aloha", Key: "images/cam_right_wrist", Slot: 2, ChannelsFirst: true},
	{Family: "aloha", Key: "images/cam_low", Slot: -1, ChannelsFirst: true},
}

// CameraKey is one camera key of an observation and the slot it fills (-1: not a pi0.5 input).
type CameraKey struct {
	Family        string // "policy" (named after an image feature), "libero", "droid", "aloha"
	Key           string
	Slot          int
	ChannelsFirst bool   // 3xHxW frames (else HxWx3, or 3xHxW by shape)
	Camera        string // the policy camera of the slot ("" when unused)
}

// IsCameraKey reports whether an observation key names a camera frame: a robot family's key,
// "observation.images.<camera>", "images/<camera>", or one of the policy's camera names.
func (p *Policy) IsCameraKey(key string) bool {
	if _, ok := robotCamera(key); ok {
		return true
	}
	return strings.HasPrefix(key, imagePrefix) || strings.HasPrefix(key, "images/") || slices.Contains(p.Config.Cameras(), key)
}

func robotCamera(key string) (CameraKey, bool) {
	for _, k := range robotCameraKeys {
		if k.Key == key {
			return k, true
		}
	}
	return CameraKey{}, false
}

// slotCamera names the policy camera of a slot: the config's image feature at that position, else
// "slot N" (a checkpoint without image features).
func (p *Policy) slotCamera(slot int) string {
	if cams := p.Config.Cameras(); slot < len(cams) {
		return cams[slot]
	}
	return fmt.Sprintf("slot %d", slot)
}

// ResolveCameras maps the camera keys of one observation to slots, in slot order; unused keys (ALOHA's
// cam_low) come back with Slot -1 at the end. Cameras named after the policy's image features go to
// their feature's position (sorted by name when the config has none). Two keys for one slot, or a
// name the policy does not have, is a *RequestError on field "images".
func (p *Policy) ResolveCameras(keys []string) ([]CameraKey, error) {
	known := p.Config.Cameras()
	var out, named []CameraKey
	for _, key := range keys {
		if k, ok := robotCamera(key); ok {
			if k.Slot >= 0 {
				k.Camera = p.slotCamera(k.Slot)
			}
			out = append(out, k)
			continue
		}
		name := strings.TrimPrefix(strings.TrimPrefix(key, "images/"), imagePrefix)
		k := CameraKey{Family: "policy", Key: key, Camera: name, Slot: slices.Index(known, name)}
		if len(known) > 0 && k.Slot < 0 {
			return nil, badField("images", "unknown camera %q; this policy's cameras are %v (or a robot's keys: %s)", key, known, robotKeyList())
		}
		named = append(named, k)
	}
	if len(known) == 0 { // no image features: policy-named cameras fill the slots in name order
		slices.SortFunc(named, func(a, b CameraKey) int { return strings.Compare(a.Camera, b.Camera) })
		for i := range named {
			named[i].Slot = i
		}
	}
	out = append(out, named...)
	slices.SortStableFunc(out, func(a, b CameraKey) int {
		switch {
		case a.Slot < 0 && b.Slot >= 0:
			return 1
		case b.Slot < 0 && a.Slot >= 0:
			return -1
		}
		return a.Slot - b.Slot
	})
	for i := 1; i < len(out); i++ {
		if out[i].Slot >= 0 && out[i].Slot == out[i-1].Slot {
			return nil, badField("images", "%q and %q both fill camera %s", out[i-1].Key, out[i].Key, p.slotCamera(out[i].Slot))
		}
	}
	return out, nil
}

// CameraKeys lists every camera key the policy takes and the camera each fills (the mapping the
// websocket metadata reports).
func (p *Policy) CameraKeys() []CameraKey {
	var out []CameraKey
	for i, name := range p.Config.Cameras() {
		out = append(out, CameraKey{Family: "policy", Key: imagePrefix + name, Slot: i, Camera: name})
	}
	for _, k := range robotCameraKeys {
		if k.Slot >= 0 {
			k.Camera = p.slotCamera(k.Slot)
		}
		out = append(out, k)
	}
	return out
}

func robotKeyList() string {
	keys := make([]string, len(robotCameraKeys))
	for i, k := range robotCameraKeys {
		keys[i] = k.Key
	}
	return strings.Join(keys, ", ")
}
