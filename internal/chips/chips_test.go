package chips

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The one grammar of `serve --device-id` and `supervise --chips`: both take
// ranges such as 0-3, and an id above MaxID is refused before anything is
// created for it (0-100000 would otherwise mean a lock file per id).
func TestParse(t *testing.T) {
	cases := []struct {
		in      string
		want    []int
		wantErr string
	}{
		{"0", []int{0}, ""},
		{"0,1", []int{0, 1}, ""},
		{"0-3", []int{0, 1, 2, 3}, ""},
		{" 2 , 0-1 ", []int{2, 0, 1}, ""},
		{"0-3,5", []int{0, 1, 2, 3, 5}, ""},
		{"255", []int{255}, ""},
		{"0-100000", nil, "chip id 100000 is above 255"},
		{"256", nil, "above 255"},
		{"", nil, "want a chip id or a range"},
		{"0,,1", nil, "want a chip id or a range"},
		{"-1", nil, "want a chip id or a range"},
		{"a", nil, "not a chip id"},
		{"3-1", nil, "runs backwards"},
		{"0-2,1", nil, "names chip 1 twice"},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("Parse(%q) = %v, %v; want error %q", c.in, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		if back, err := Parse(Format(got)); err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("Format(%v) = %q does not read back: %v, %v", got, Format(got), back, err)
		}
	}
}

func TestDiscover(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"3", "0", "1", "not-a-chip", "999"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Discover(dir)
	if err != nil || !reflect.DeepEqual(got, []int{0, 1, 3}) {
		t.Errorf("Discover = %v, %v; want [0 1 3]", got, err)
	}
	if got, err := Discover(filepath.Join(dir, "absent")); err != nil || got != nil {
		t.Errorf("absent folder: %v, %v; want none", got, err)
	}
	if m := Missing([]int{0, 2, 3}, got); !reflect.DeepEqual(m, []int{2}) {
		t.Errorf("Missing = %v", m)
	}
}
