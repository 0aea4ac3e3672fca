package builder

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/builder/kind"
	"github.com/ttmodel/tt-model/builder/oci"
	"github.com/ttmodel/tt-model/internal/engine"
)

// builtThroughEngine names the engine build path in the wire manifest.
const builtThroughEngine = "Docker engine build API"

// kindImage is the image of a Python kind (http-server, tt-dit-server,
// vllm-plugin, vllm-fork) from its rendered build context: without a daemon
// when install_engine.sh has nothing to do, else through the Docker engine.
// verify.sh then runs in the built image.
type kindImage struct {
	j         *job
	eng       *dockerEngine // nil: daemonless
	inputs    *kindInputs
	rc        *kindContext
	files     contextFiles
	base      *baseImage // nil on the engine path
	tool      binary
	toolSum   string
	toolSize  int64
	record    map[string]any
	builtWith string
	codeDir   string
	fs        *oci.Rootfs // the daemonless image's file system
}

// prepareKind stages the install inputs, finds tt-model, connects to the
// engine when something installs at build time, opens the base and renders
// the build context.
func prepareKind(ctx context.Context, j *job) (_ *kindImage, err error) {
	m, p := j.m, j.p
	if j.baseRef == "" || j.baseRef == "scratch" {
		return nil, fmt.Errorf("kind %s needs a base image with bash and Python (and tt-metal's ttnn to drive chips): "+
			"set runtime.base or --base to a registry reference, an OCI layout, a docker-archive or an image in the Docker engine "+
			"(this tool does not build tt-metal)", m.Kind)
	}
	inputsDir := filepath.Join(j.scratch, "ctx")
	inputs, err := stageKindInputs(ctx, m, j.workDir, inputsDir)
	if err != nil {
		return nil, err
	}
	renderer, _ := kind.For(m.Kind)
	install, err := renderer.InstallSteps(inputs.in)
	if err != nil {
		return nil, err
	}
	binDir := filepath.Join(j.scratch, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, err
	}
	tool, err := locateTool(ctx, binaryPlan{Executable: j.opts.Executable, BuildDir: binDir, Log: p.writer(),
		SearchDirs: []string{filepath.Dir(absPath(j.workDir, m.File)), j.workDir}})
	if err != nil {
		return nil, err
	}
	toolSum, toolSize, err := fileSHA256(tool.HostPath)
	if err != nil {
		return nil, err
	}

	var eng *dockerEngine
	if len(install) > 0 {
		p.stage("kind %s installs at build time (%d step(s) of install_engine.sh): building through the Docker engine", m.Kind, len(install))
		if eng, err = connectDocker(ctx); err != nil {
			return nil, fmt.Errorf("kind %s runs install_engine.sh at build time (first: %s), which needs a Docker engine: %w", m.Kind, install[0].What, err)
		}
		defer func() {
			if err != nil {
				eng.Close()
			}
		}()
	} else {
		p.stage("kind %s installs nothing at build time: assembling the image without a daemon", m.Kind)
	}

	p.stage("base image: %s", j.baseRef)
	base, from, baseDigest, fromNote, err := kindBase(ctx, j, eng)
	if err != nil {
		return nil, err
	}

	builtWith := builtDaemonless
	if eng != nil {
		builtWith = builtThroughEngine
	}
	record := j.record(j.baseRef, baseDigest, builtWith)
	record["tool"] = map[string]any{"from": tool.From, "sha256": toolSum, "static": true}
	for k, v := range inputs.record {
		record[k] = v
	}
	manifestJSON, err := j.manifestLabel(record, inputs.in.Runtime)
	if err != nil {
		return nil, err
	}
	labels := imageLabels(m, j.code, manifestJSON, j.builtAt(), gitRevision(ctx, filepath.Dir(absPath(j.workDir, m.File))))
	rc, err := renderKind(inputs.in, renderMeta{ToolVersion: j.opts.ToolVersion, From: from, FromNote: fromNote,
		Labels: labels, CtxInputs: inputs.any})
	if err != nil {
		return nil, err
	}
	codeDir := j.staged.CodeTree()
	files, err := kindContextFiles(rc, tool.HostPath, codeDir, inputsDir)
	if err != nil {
		return nil, err
	}
	if j.opts.Context != "" {
		if err := writeContextDir(files, j.opts.Context); err != nil {
			return nil, err
		}
		p.stage("wrote the build context to %s", j.opts.Context)
	}
	return &kindImage{j: j, eng: eng, inputs: inputs, rc: rc, files: files, base: base, tool: tool, toolSum: toolSum, toolSize: toolSize,
		record: record, builtWith: builtWith, codeDir: codeDir}, nil
}

func (k *kindImage) layers() ([]*oci.LayerPlan, error) {
	if k.eng != nil {
		return nil, nil
	}
	k.j.p.stage("assembling the image")
	if !k.base.Tree.IsFile("/bin/bash") {
		return nil, fmt.Errorf("base %s has no /bin/bash: kind %s runs bash scripts (serve-<profile>.sh, verify.sh); base it on an image with bash and Python", k.base.Ref, k.rc.Kind)
	}
	k.fs = oci.NewRootfs(k.base.Tree)
	return kindLayers(k.fs, k.rc, k.base, k.tool, k.codeDir)
}

func (k *kindImage) image(ctx context.Context, layers []oci.LayerBlob) (v1.Image, string, error) {
	var img v1.Image
	var tag string
	if k.eng != nil {
		var err error
		if img, tag, k.builtWith, err = buildInEngine(ctx, k.eng.c, k.j, k.files, k.rc); err != nil {
			return nil, "", err
		}
	} else {
		var err error
		img, err = stackLayers(k.base, layers, k.j.epoch, func(cfg v1.Config) v1.Config { return kindImageConfig(cfg, k.rc.Config) }, k.j.p)
		if err != nil {
			return nil, "", err
		}
		digest, err := img.Digest()
		if err != nil {
			return nil, "", err
		}
		tag = imageTag(k.j.m.Name, digest)
	}
	k.j.p.stage("image %s", tag)
	return img, tag, nil
}

func (k *kindImage) verify(ctx context.Context, img v1.Image, tag string) (string, error) {
	j := k.j
	r, err := openVerifyRunner(ctx, j.opts.Verify, img, tag, k.eng == nil, j.scratch, j.p)
	if err != nil {
		return "", err
	}
	defer r.Close()
	if err := runKindVerify(ctx, r, k.rc, j.p); err != nil {
		return "", err
	}
	return r.Where(), nil
}

func (k *kindImage) built(img v1.Image, tag string, layers []oci.LayerBlob, verifiedIn string) *built {
	b := &built{image: img, tag: tag, layers: layers, baseRef: k.j.baseRef, verifiedIn: verifiedIn, builtWith: k.builtWith,
		record: k.record, runtime: k.inputs.in.Runtime, baseUncompressed: -1,
		binaries: []BinaryInfo{{ImagePath: ImageToolPath, From: k.tool.From, Size: k.toolSize, SHA256: k.toolSum, Static: true}}}
	if k.base != nil {
		b.baseUncompressed, b.blobFiles = k.base.Uncompressed, blobFiles(k.base, layers)
	}
	return b
}

func (k *kindImage) close() {
	if k.eng != nil {
		k.eng.Close()
	}
}

// kindBase opens the base: for the engine path, made available to the
// engine (base is nil then); for the daemonless one, read as an image. It
// returns the name the Dockerfile's FROM gives it, its digest, and a note
// when that name is not the one the user wrote.
func kindBase(ctx context.Context, j *job, eng *dockerEngine) (base *baseImage, from, digest, note string, err error) {
	if eng != nil {
		from, digest, note, err = engineBase(ctx, eng.c, j.baseField(), j.baseRef, j.baseAt(), j.p)
		return nil, from, digest, note, err
	}
	if base, err = loadBase(ctx, j.baseField(), j.baseRef, j.baseAt(), filepath.Join(j.scratch, "base")); err != nil {
		return nil, "", "", "", err
	}
	from = j.baseRef
	if isLocalPathRef(j.workDir, j.baseRef) {
		from = "tt-model-base:" + shortHex(mustHex(base.Digest))
		note = fmt.Sprintf("FROM names the base %s as tt-model loads it into an engine.", j.baseRef)
	}
	return base, from, base.Digest, note, nil
}

// buildInEngine builds the context through the engine under a provisional
// tag, exports the result, and tags it by its digest as every package
// image is (tt-model/<name>:<digest[:12]>).
func buildInEngine(ctx context.Context, c *client.Client, j *job, files contextFiles, rc *kindContext) (v1.Image, string, string, error) {
	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		return nil, "", "", err
	}
	provisional := fmt.Sprintf("tt-model/%s:build-%s", j.m.Name, hex.EncodeToString(suffix))
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = c.ImageRemove(rctx, provisional, client.ImageRemoveOptions{})
	}()
	j.p.stage("docker build (%d files in the context, network %s)", len(files), orDefault(j.opts.BuildNetwork, "the engine's default"))
	builder, err := engineBuild(ctx, c, files, j.epoch, provisional, j.opts.BuildNetwork, rc.Install, j.p)
	if err != nil {
		return nil, "", "", err
	}
	j.p.stage("exporting the built image from the engine")
	exported, err := engine.Save(ctx, c, provisional, j.scratch)
	if err != nil {
		return nil, "", "", err
	}
	img := oci.OCITyped{Image: exported}
	digest, err := img.Digest()
	if err != nil {
		return nil, "", "", err
	}
	tag := imageTag(j.m.Name, digest)
	if _, err := c.ImageTag(ctx, client.ImageTagOptions{Source: provisional, Target: tag}); err != nil {
		return nil, "", "", fmt.Errorf("tag the built image %s: %w", tag, err)
	}
	return img, tag, fmt.Sprintf("%s (%s)", builtThroughEngine, builder), nil
}

// writeContextDir replaces dir with the build context.
func writeContextDir(files contextFiles, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("--context %s: %w", dir, err)
	}
	if err := files.writeDir(dir); err != nil {
		return fmt.Errorf("--context %s: %w", dir, err)
	}
	return nil
}

func mustHex(digest string) string {
	h, err := v1.NewHash(digest)
	if err != nil {
		return digest
	}
	return h.Hex
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
