package runner

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseHubRef(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.MkdirAll(filepath.Join("build", "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		arg  string
		ok   bool
		want HubRef
	}{
		{"acme/rf-detr", true, HubRef{Repo: "acme/rf-detr"}},
		{"acme/rf-detr@dev", true, HubRef{Repo: "acme/rf-detr", Revision: "dev"}},
		{"acme/rf-detr@7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a", true, HubRef{Repo: "acme/rf-detr", Revision: "7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a"}},
		{"build/pkg", false, HubRef{}},     // an existing folder
		{"build/missing", false, HubRef{}}, // a mistyped path under an existing folder
		{"rf-detr", false, HubRef{}},       // no namespace
		{"acme/a--b", false, HubRef{}},     // not a valid repo id
		{"tt-model.yaml", false, HubRef{}},
	}
	for _, tc := range cases {
		got, ok := ParseHubRef(tc.arg)
		if ok != tc.ok || got != tc.want {
			t.Errorf("ParseHubRef(%q) = %+v, %v; want %+v, %v", tc.arg, got, ok, tc.want, tc.ok)
		}
	}
}
