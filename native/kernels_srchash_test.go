package native

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"
)

// kernelSourcesHash hashes the C sources of every kernel folder that
// native's unity files include (names and contents, in name order).
func kernelSourcesHash(t *testing.T) string {
	t.Helper()
	var names []string
	for _, dir := range []string{"common", "pi05", "rfdetr"} {
		for _, pat := range []string{"*.c", "*.h"} {
			m, err := filepath.Glob(filepath.Join("..", "kernels", dir, pat))
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, m...)
		}
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(n), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestKernelSourcesHash(t *testing.T) {
	got := kernelSourcesHash(t)
	if got == kernelSourcesSHA256 {
		return
	}
	if os.Getenv("TT_UPDATE_SRCHASH") == "1" {
		b, err := os.ReadFile("kernels_srchash.go")
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(`const kernelSourcesSHA256 = "[0-9a-f]*"`)
		out := re.ReplaceAll(b, []byte(fmt.Sprintf("const kernelSourcesSHA256 = %q", got)))
		if err := os.WriteFile("kernels_srchash.go", out, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("kernels_srchash.go updated to %s: run the tests again to build the new kernels", got)
		return
	}
	t.Fatalf("kernels/ changed but native/kernels_srchash.go has the old hash, so cgo may "+
		"have reused a stale build: set kernelSourcesSHA256 = %q (TT_UPDATE_SRCHASH=1 go test ./native -run TestKernelSourcesHash)", got)
}
