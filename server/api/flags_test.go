package api

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadAPIKey(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flag      string
		env       map[string]string
		key, from string
		err       string
	}{
		{"", nil, "", "", ""},
		{file, map[string]string{"TT_API_KEY": "env"}, "from-file", "--api-key-file " + file, ""},
		{"", map[string]string{"TT_API_KEY_FILE": file, "TT_API_KEY": "env"}, "from-file", "TT_API_KEY_FILE " + file, ""},
		{"", map[string]string{"TT_API_KEY": " env "}, "env", "TT_API_KEY", ""},
		{"", map[string]string{"TT_API_KEY": " "}, "", "", "TT_API_KEY is blank"},
		{empty, nil, "", "", "the file is empty"},
		{filepath.Join(dir, "missing"), nil, "", "", "--api-key-file"},
	} {
		key, from, err := LoadAPIKey(c.flag, func(k string) string { return c.env[k] })
		if key != c.key || from != c.from || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("LoadAPIKey(%q, %v) = %q, %q, %v; want %q, %q, %q", c.flag, c.env, key, from, err, c.key, c.from, c.err)
		}
		if err != nil && strings.Contains(err.Error(), "from-file") {
			t.Errorf("the error shows the key: %v", err)
		}
	}
}
