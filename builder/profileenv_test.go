package builder

import (
	"bytes"
	"github.com/ttmodel/tt-model/internal/ocilayout"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/manifest"
)

// TestProfileEnvSplit: of a package's profiles, the image's Env gets only
// the variables every profile sets to the same value; the packaged
// profile's others become the supervisor's --default-env flags, in the
// kind's order. A one-profile package keeps its whole environment in Env.
func TestProfileEnvSplit(t *testing.T) {
	for _, tc := range []struct {
		file, profile string
		shared        []string // some of what Env must hold
		notShared     []string
		flags         []string
	}{
		{"testdata/pkg/tt-model.yaml", "", []string{"HF_MODEL", "TT_WEIGHTS_REVISION"}, []string{"MESH_DEVICE", "TT_MESH_SHAPE"},
			[]string{"--default-env", "MESH_DEVICE=P150", "--default-env", "TT_MESH_SHAPE=1x1"}},
		{"testdata/pkg/tt-model.yaml", "two-chip", []string{"HF_MODEL"}, []string{"MESH_DEVICE"},
			[]string{"--default-env", "MESH_DEVICE=P300", "--default-env", "TT_MESH_SHAPE=1x2"}},
		{"../models/pi05/tt-model.yaml", "", []string{"HF_MODEL", "MESH_DEVICE", "TT_MESH_SHAPE", "PI05_MEGAKERNEL", "PI05_HANG_MARKER"},
			[]string{"PI05_LAYOUT", "PI05_SLO_MS", "PI05_MAX_BATCH"},
			[]string{"--default-env", "PI05_LAYOUT=dp", "--default-env", "PI05_SLO_CLOCK_GUARD=1.69",
				"--default-env", "PI05_SLO_MS=100", "--default-env", "PI05_SLO_P99_MS=110"}},
		{"../models/pi05/tt-model.yaml", "disaggregated", []string{"PI05_NUM_STEPS"}, []string{"PI05_LAYOUT"},
			[]string{"--default-env", "PI05_LAYOUT=pd", "--default-env", "PI05_MAX_BATCH=4"}},
		{"../models/rf-detr/tt-model.yaml", "", []string{"HF_MODEL", "MESH_DEVICE", "TT_MESH_SHAPE", "TT_WEIGHTS_REVISION"}, nil, nil},
	} {
		name := tc.profile
		if name == "" {
			name = "default"
		}
		t.Run(filepath.Base(filepath.Dir(tc.file))+"/"+name, func(t *testing.T) {
			m, err := manifest.Load(tc.file, manifest.Options{WorkDir: ".."})
			if err != nil {
				t.Fatal(err)
			}
			launches, err := profileLaunches(m, tc.profile)
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.profile; want != "" && launches[0].Name != want {
				t.Fatalf("first launch %s, want %s", launches[0].Name, want)
			}
			shared := sharedEnv(launches)
			for _, k := range tc.shared {
				if _, ok := shared[k]; !ok {
					t.Errorf("%s is not shared: %v", k, shared)
				}
			}
			for _, k := range tc.notShared {
				if _, ok := shared[k]; ok {
					t.Errorf("%s is shared, but the profiles differ on it", k)
				}
			}
			if got := defaultEnvFlags(launches[0].Launch, shared); !slices.Equal(got, tc.flags) {
				t.Errorf("flags %q, want %q", got, tc.flags)
			}
		})
	}
}

// TestVerifyGetsThePackagedProfile: `tt-model-server --verify` runs with the
// packaged profile's whole environment, as a plain `docker run` of the image
// gives it, though the image's Env lacks the variables the profiles differ
// on.
func TestVerifyGetsThePackagedProfile(t *testing.T) {
	bin := fixtureBin(t)
	m, work := testPackage(t, nil)
	opts := packageOpts(m, work, bin, filepath.Join(work, "out"), VerifyRootfs)
	opts.Profile = "two-chip"
	var log bytes.Buffer
	opts.Log = &log
	res := mustPackage(t, opts)
	// miniserver --verify prints the TT_MESH_SHAPE it got.
	if !strings.Contains(log.String(), "verify ok uid=1000 HF_HOME=/hf TT_MESH_SHAPE=1x2") {
		t.Errorf("the verify step did not get the two-chip profile's env:\n%s", log.String())
	}
	img, err := ocilayout.Image(filepath.Join(res.Dir, "image"), res.Image)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != "/usr/local/bin/tt-model supervise --default-env MESH_DEVICE=P300 --default-env TT_MESH_SHAPE=1x2 --" {
		t.Errorf("entrypoint %q", got)
	}
	if got := strings.Join(cf.Config.Cmd, " "); got != "/usr/local/bin/tt-model-server --host 0.0.0.0 --port 8001" {
		t.Errorf("cmd %q", got)
	}
}
