package builder

import (
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/ttmodel/tt-model/builder/oci"
)

// builtDaemonless names the daemonless build path in results and cards.
const builtDaemonless = "daemonless (go-containerregistry)"

// goServerImage is a tt-go-server image: tt-model (the supervisor, PID 1)
// and tt-model-server with their shared-library closure on the base,
// assembled without a daemon, then verified (tt-model-server --verify and
// the manifest's verify list, shell commands).
type goServerImage struct {
	j       *job
	spec    imageSpec
	binInfo []BinaryInfo
	record  map[string]any
	fs      *oci.Rootfs // the image's file system, from layers on
}

// prepareGoServer finds the binaries and their closure, opens the base and
// makes the image's environment, entrypoint and labels.
func prepareGoServer(ctx context.Context, j *job) (*goServerImage, error) {
	m, p := j.m, j.p
	serverPath := stringOf(m.Runtime["server"])
	if serverPath != "" && !filepath.IsAbs(serverPath) {
		serverPath = filepath.Join(j.workDir, serverPath)
	}
	buildDir := filepath.Join(j.scratch, "bin")
	if err := os.MkdirAll(buildDir, 0o755); err != nil {
		return nil, err
	}
	p.stage("locating tt-model-server and tt-model")
	server, tool, err := locateBinaries(ctx, binaryPlan{
		ServerPath: serverPath, Executable: j.opts.Executable,
		SearchDirs: []string{filepath.Dir(absPath(j.workDir, m.File)), j.workDir},
		BuildDir:   buildDir, Log: p.writer(),
	})
	if err != nil {
		return nil, err
	}
	search, err := oci.NewLibSearch("/")
	if err != nil {
		return nil, err
	}
	closure, binInfo, err := closureOf(search, []placedBinary{{tool, ImageToolPath}, {server, ImageServerPath}})
	if err != nil {
		return nil, err
	}
	for _, b := range binInfo {
		p.stage("%s: %s, %s, static=%v", b.ImagePath, b.From, humanBytes(b.Size), b.Static)
	}

	p.stage("base image: %s", orScratch(j.baseRef))
	base, err := loadBase(ctx, j.baseField(), j.baseRef, j.baseAt(), filepath.Join(j.scratch, "base"))
	if err != nil {
		return nil, err
	}
	// The image's Env holds only what every profile's server shares; the
	// rest of the packaged profile's environment travels in the entrypoint
	// as the supervisor's --default-env flags, which a runner serving
	// another profile drops (sharedEnv says why).
	launches, err := profileLaunches(m, j.profile.Name)
	if err != nil {
		return nil, err
	}
	shared := sharedEnv(launches)
	env := map[string]string{"HF_HOME": ImageHFDir, "TT_METAL_CACHE": ImageCacheDir, "HOME": ImageHomeDir}
	for k, v := range shared {
		env[k] = v
	}
	if extra := closure.ExtraLibraryPath(); len(extra) > 0 {
		env["LD_LIBRARY_PATH"] = strings.Join(extra, ":")
	}
	record := j.record(base.Ref, base.Digest, builtDaemonless)
	record["server"] = map[string]any{"from": binInfo[1].From, "sha256": binInfo[1].SHA256, "static": binInfo[1].Static}
	record["tool"] = map[string]any{"from": binInfo[0].From, "sha256": binInfo[0].SHA256, "static": binInfo[0].Static}
	manifestJSON, err := j.manifestLabel(record, nil)
	if err != nil {
		return nil, err
	}
	spec := imageSpec{
		Base: base, Server: server, Tool: tool, Closure: closure,
		Entrypoint: append(append([]string{ImageToolPath, "supervise"}, defaultEnvFlags(j.launch, shared)...), "--"),
		Cmd:        append([]string{ImageServerPath}, j.launch.Argv[1:]...),
		Env:        env,
		Port:       j.launch.Port,
		Labels:     imageLabels(m, j.code, manifestJSON, j.builtAt(), gitRevision(ctx, filepath.Dir(absPath(j.workDir, m.File)))),
		Epoch:      j.epoch,
	}
	return &goServerImage{j: j, spec: spec, binInfo: binInfo, record: record}, nil
}

func (g *goServerImage) layers() ([]*oci.LayerPlan, error) {
	g.j.p.stage("assembling the image")
	g.fs = oci.NewRootfs(g.spec.Base.Tree)
	return goServerLayers(g.fs, g.spec)
}

func (g *goServerImage) image(_ context.Context, layers []oci.LayerBlob) (v1.Image, string, error) {
	spec := g.spec
	img, err := stackLayers(spec.Base, layers, spec.Epoch, func(c v1.Config) v1.Config { return imageConfig(c, spec) }, g.j.p)
	if err != nil {
		return nil, "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, "", err
	}
	tag := imageTag(g.j.m.Name, digest)
	g.j.p.stage("image %s (%s)", tag, digest)
	return img, tag, nil
}

// verify checks the image as a plain `docker run` of it serves: with the
// packaged profile's whole environment.
func (g *goServerImage) verify(ctx context.Context, img v1.Image, tag string) (string, error) {
	j := g.j
	return verifyImage(ctx, j.opts.Verify, img, g.fs.Tree, tag, j.m.Verify, launchEnv(j.launch), j.scratch, j.p)
}

func (g *goServerImage) built(img v1.Image, tag string, layers []oci.LayerBlob, verifiedIn string) *built {
	closure, base := g.spec.Closure, g.spec.Base
	var libs []string
	if in := closure.Interpreter; in != nil {
		libs = append(libs, in.ImagePath)
	}
	for _, l := range closure.Libraries {
		libs = append(libs, l.ImagePath)
	}
	return &built{image: img, tag: tag, layers: layers, baseRef: base.Ref, verifiedIn: verifiedIn,
		builtWith: builtDaemonless, record: g.record, binaries: g.binInfo, libraries: libs,
		baseUncompressed: base.Uncompressed, blobFiles: blobFiles(base, layers)}
}

func (g *goServerImage) close() {}
