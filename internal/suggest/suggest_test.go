package suggest

import (
	"slices"
	"testing"
)

func TestNear(t *testing.T) {
	names := []string{"mesh_device", "hardware", "port", "print", "profile"}
	for _, c := range []struct {
		typed string
		want  []string
	}{
		{"mesh_devcie", []string{"mesh_device"}},
		{"prot", []string{"port", "print"}},
		{"pro", []string{"port", "profile"}},
		{"hardware", nil},
		{"zzzzzz", nil},
	} {
		if got := Near(c.typed, names); !slices.Equal(got, c.want) {
			t.Errorf("Near(%q) = %q, want %q", c.typed, got, c.want)
		}
	}
	if d := Distance("kitten", "Sitting"); d != 3 {
		t.Errorf("Distance(kitten, Sitting) = %d, want 3", d)
	}
}
