package imagetest

import (
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

func TestLinux(t *testing.T) {
	base, err := random.Image(100, 1)
	if err != nil {
		t.Fatal(err)
	}
	img, err := Linux(base, func(cf *v1.ConfigFile) { cf.Config.Env = []string{"A=1"} })
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || !slices.Equal(cf.Config.Env, []string{"A=1"}) {
		t.Errorf("config %s/%s env %v, want linux/amd64 with A=1", cf.OS, cf.Architecture, cf.Config.Env)
	}
	// The edit works on a copy: the image it started from keeps its config.
	orig, err := base.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if len(orig.Config.Env) != 0 {
		t.Errorf("the base's env became %v", orig.Config.Env)
	}
	if _, err := Linux(base, nil); err != nil {
		t.Errorf("no edit: %v", err)
	}
}
