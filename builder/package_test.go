package builder

import (
	"path/filepath"
	"testing"
)

func TestPackageRootfsSmoke(t *testing.T) {
	bin := fixtureBin(t)
	m, work := testPackage(t, nil)
	res := mustPackage(t, packageOpts(m, work, bin, filepath.Join(work, "out"), VerifyRootfs))
	t.Logf("%+v", res)
}
