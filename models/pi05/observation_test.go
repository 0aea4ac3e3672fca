package pi05

import (
	"errors"
	"strings"
	"testing"
)

func keysOf(ks []CameraKey) string {
	var parts []string
	for _, k := range ks {
		parts = append(parts, k.Key+"->"+k.Camera)
	}
	return strings.Join(parts, " ")
}

// The camera keys of openpi's example robots land in openpi's slots, mapped to this policy's image
// features by position; policy-named keys by name.
func TestResolveCameras(t *testing.T) {
	p := &Policy{Config: PolicyConfig{InputFeatures: Features{
		{Name: "observation.images.base_0_rgb", Type: "VISUAL"},
		{Name: "observation.images.left_wrist_0_rgb", Type: "VISUAL"},
		{Name: "observation.images.right_wrist_0_rgb", Type: "VISUAL"},
	}}}
	for _, tc := range []struct {
		keys []string
		want string
	}{
		{[]string{"observation/wrist_image", "observation/image"}, "observation/image->base_0_rgb observation/wrist_image->left_wrist_0_rgb"},
		{[]string{"observation/wrist_image_left", "observation/exterior_image_1_left"}, "observation/exterior_image_1_left->base_0_rgb observation/wrist_image_left->left_wrist_0_rgb"},
		{[]string{"images/cam_low", "images/cam_right_wrist", "images/cam_high"}, "images/cam_high->base_0_rgb images/cam_right_wrist->right_wrist_0_rgb images/cam_low->"},
		{[]string{"observation.images.right_wrist_0_rgb", "base_0_rgb"}, "base_0_rgb->base_0_rgb observation.images.right_wrist_0_rgb->right_wrist_0_rgb"},
	} {
		got, err := p.ResolveCameras(tc.keys)
		if err != nil || keysOf(got) != tc.want {
			t.Errorf("%v: %s, %v; want %s", tc.keys, keysOf(got), err, tc.want)
		}
	}
	var re *RequestError
	if _, err := p.ResolveCameras([]string{"observation/image", "observation.images.base_0_rgb"}); !errors.As(err, &re) || !strings.Contains(err.Error(), "both fill camera base_0_rgb") {
		t.Errorf("two keys for one camera: %v", err)
	}
	if _, err := p.ResolveCameras([]string{"observation.images.top"}); !errors.As(err, &re) || !strings.Contains(err.Error(), "observation/image") {
		t.Errorf("unknown camera: %v", err)
	}
	// A LIBERO checkpoint names its cameras image, image2: the robot keys follow the positions.
	libero := &Policy{Config: PolicyConfig{InputFeatures: Features{{Name: "observation.images.image", Type: "VISUAL"}, {Name: "observation.images.image2", Type: "VISUAL"}}}}
	got, err := libero.ResolveCameras([]string{"observation/image", "observation/wrist_image"})
	if err != nil || keysOf(got) != "observation/image->image observation/wrist_image->image2" {
		t.Errorf("LIBERO checkpoint: %s, %v", keysOf(got), err)
	}
	if m := keysOf(libero.CameraKeys()); !strings.Contains(m, "observation.images.image2->image2") || !strings.Contains(m, "images/cam_right_wrist->slot 2") {
		t.Errorf("CameraKeys: %s", m)
	}
}
