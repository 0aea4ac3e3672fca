package manifest

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode feeds arbitrary documents through decode, validate, profile
// resolution and the wire renderer: none of them may panic, and every error
// must carry the file name and a position.
func FuzzDecode(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*.yaml")
	for _, s := range seeds {
		if data, err := os.ReadFile(s); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, errs := Decode("fuzz.yaml", data)
		for _, e := range errs {
			if e.File != "fuzz.yaml" || e.Pos.Line < 1 {
				t.Fatalf("error without file or position: %#v", e)
			}
		}
		if m == nil {
			return
		}
		m.File = "fuzz.yaml"
		for _, e := range Validate(m) {
			if e.File != "fuzz.yaml" {
				t.Fatalf("error without file: %#v", e)
			}
		}
		for _, p := range m.Profiles() {
			if r, err := m.ResolveProfile(p.Name); err == nil {
				_, _ = LaunchFor(m.Kind, m.Runtime, m.Weights.Repo, r)
			}
		}
		w := m.ToWire(WireInfo{})
		if _, err := w.MarshalJSON(); err != nil {
			t.Fatalf("wire of a decoded manifest does not encode: %v", err)
		}
	})
}
