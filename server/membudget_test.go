package server

import (
	"strings"
	"testing"
)

func TestRequestMemoryFromEnv(t *testing.T) {
	for _, c := range []struct {
		value string
		want  int64
		err   string
	}{
		{"", DefaultRequestMemory, ""},
		{"512", 512 << 20, ""},
		{" 64 ", 64 << 20, ""},
		{"0", 0, ""},
		{"1048576", 1 << 40, ""},
		{"1048577", 0, `TT_REQUEST_MEMORY_MB="1048577": want MiB from 0 (no budget) to 1048576`},
		{"-1", 0, "want MiB"},
		{"1GiB", 0, "want MiB"},
	} {
		got, err := RequestMemoryFromEnv(func(k string) string {
			if k == RequestMemoryEnv {
				return c.value
			}
			return ""
		})
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: %d, %v; want %d, %q", c.value, got, err, c.want, c.err)
		}
	}
}
