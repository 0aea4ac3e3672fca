package safename

import (
	"strings"
	"testing"
)

func TestRevision(t *testing.T) {
	for _, ok := range []string{"main", "v1.0", "refs/pr/1", "refs/convert/parquet", "feature/x-y_z", "0123456789abcdef0123456789abcdef01234567"} {
		if err := Revision(ok); err != nil {
			t.Errorf("Revision(%q) = %v, want nil", ok, err)
		}
	}
	for rev, want := range map[string]string{
		"":                                 "empty",
		"../../../victim":                  `".."`,
		"a/../b":                           `".."`,
		"/etc/passwd":                      `start with "/"`,
		"main/":                            `end with "/"`,
		"a//b":                             `"//"`,
		"a\nb":                             "control character",
		"a\rb":                             "control character",
		"a\x00b":                           "control character",
		"a\x7fb":                           "control character",
		".hidden":                          `start with "."`,
		"x/.y":                             `start with "."`,
		"main.lock":                        `".lock"`,
		"a b":                              `' '`,
		"a:b":                              `':'`,
		"a\\b":                             `'\\'`,
		"@":                                `"@"`,
		"a@{1}":                            `"@{"`,
		"end.":                             `end with "."`,
		strings.Repeat("a", MaxRevision+1): "longer than",
	} {
		err := Revision(rev)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Revision(%q) = %v, want an error containing %s", rev, err, want)
		}
	}
}

func TestJoin(t *testing.T) {
	if p, err := Join("/cache/tt-model", "rf-detr", "cache"); err != nil || p != "/cache/tt-model/rf-detr/cache" {
		t.Errorf("Join = %q, %v", p, err)
	}
	for _, elem := range [][]string{{"../../victim"}, {"a", "../../b"}, {".."}, {"."}, {""}} {
		if p, err := Join("/cache/tt-model", elem...); err == nil || !strings.Contains(err.Error(), "leaves /cache/tt-model") {
			t.Errorf("Join(%q) = %q, %v; want it refused", elem, p, err)
		}
	}
}
