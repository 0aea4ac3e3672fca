// Package builder turns a tt-model.yaml of any kind into a staged package
// (builtpkg: code/, an OCI image layout, the model card and the wire
// manifest), verifies the image, and pushes packages to OCI registries and
// the Hub. tt-go-server images and Python kinds with nothing to install are
// built with go-containerregistry and no daemon; a kind that installs
// packages at build time is built through the Docker engine's build API.
// Package is a pipeline of steps, each its own function: stage → layers →
// image → verify → write. Below it, cut by noun: builder/kind (the Python
// kinds' renderers), builder/card (the model cards) and builder/oci (tar
// layers, rootfs, ELF closure, layout); the base and layer caches, the
// engine build and the pushes stay here, each in its own file.
package builder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/ttmodel/tt-model/builder/card"
	"github.com/ttmodel/tt-model/builder/oci"
	"github.com/ttmodel/tt-model/builtpkg"
	"github.com/ttmodel/tt-model/internal/fslink"
	"github.com/ttmodel/tt-model/manifest"
)

// Verify modes.
const (
	VerifyAuto   = ""       // the Docker engine when reachable, else the unpacked rootfs
	VerifyDocker = "docker" // the Docker engine, or fail
	VerifyRootfs = "rootfs" // the unpacked rootfs (chroot)
)

// Options are the inputs of Package.
type Options struct {
	Manifest    *manifest.Manifest // loaded and validated by the caller
	OutDir      string             // parent of <name>/; "build" when empty
	Profile     string             // the profile a plain `docker run` of the image serves; "" = default
	ToolVersion string
	// Executable is the running tt-model (os.Executable), where an installed
	// tt-model-server is looked for beside it.
	Executable string
	// WorkDir resolves relative source roots and runtime paths; "" = CWD.
	WorkDir string
	// SourceDateEpoch is $SOURCE_DATE_EPOCH ("" = the commit time of the
	// package's git checkout).
	SourceDateEpoch string
	Verify          string
	// Base overrides runtime.base: a registry reference, an OCI layout
	// directory, a docker-archive tarball or an image in the Docker engine.
	Base string
	// BuildNetwork is the network of the engine build's RUN steps (docker
	// build --network: "default", "none", "host"); "" = the engine's default.
	BuildNetwork string
	// Context, when set, also receives the rendered build context of a
	// Python kind (Dockerfile, code/, scripts, tt-model): `docker build` it
	// to compare.
	Context string
	Log     io.Writer // progress; nil = silent
}

// Result is what Package made; it is also the --json summary.
type Result struct {
	Name            string        `json:"name"`
	Dir             string        `json:"dir"`
	Kind            string        `json:"kind"`
	Image           string        `json:"image"`
	Digest          string        `json:"digest"`
	ConfigDigest    string        `json:"config_digest"`
	Profile         string        `json:"profile"`
	Base            string        `json:"base"`
	BuiltWith       string        `json:"built_with"`
	SourceDateEpoch int64         `json:"source_date_epoch"`
	Layers          []LayerInfo   `json:"layers"`
	Compressed      int64         `json:"compressed_bytes"`
	Uncompressed    int64         `json:"uncompressed_bytes"`
	Binaries        []BinaryInfo  `json:"binaries"`
	Libraries       []string      `json:"libraries"`
	CodeSHA256      string        `json:"code_sha256"`
	CodeSkipped     []string      `json:"code_skipped"`
	VerifiedIn      string        `json:"verified_in"`
	Warnings        []string      `json:"warnings"`
	Elapsed         time.Duration `json:"-"`
	ElapsedSeconds  float64       `json:"elapsed_seconds"`
}

// LayerInfo describes one of our layers.
type LayerInfo struct {
	Digest       string `json:"digest"`
	Description  string `json:"description"`
	Compressed   int64  `json:"compressed_bytes"`
	Uncompressed int64  `json:"uncompressed_bytes"`
}

// BinaryInfo describes a binary the image carries.
type BinaryInfo struct {
	ImagePath string `json:"image_path"`
	From      string `json:"from"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
	Static    bool   `json:"static"`
}

// skippedSummary is one progress line for what code/ left out, by folder
// (package --json lists every path): "" when nothing was.
func skippedSummary(skipped []string) string {
	if len(skipped) == 0 {
		return ""
	}
	var dirs []string
	count := map[string]int{}
	for _, s := range skipped {
		d := path.Dir(s)
		if count[d] == 0 {
			dirs = append(dirs, d)
		}
		count[d]++
	}
	parts := make([]string, len(dirs))
	for i, d := range dirs {
		parts[i] = fmt.Sprintf("%s/ (%d)", d, count[d])
	}
	return fmt.Sprintf("code/: skipped %d file(s) as build detritus or weights, in %s (package --json lists them)", len(skipped), strings.Join(parts, ", "))
}

// Package builds <out>/<name>/ for a manifest of any kind: tt-go-server
// around our own server binaries, the Python kinds from a rendered build
// context (daemonless when nothing runs at build time, else through the
// Docker engine). Everything is made in a temporary directory beside the
// output and renamed into place only after verify passed, so a failure
// leaves the previous package intact. The steps, in order: stage code/,
// prepare the kind's image (inputs, binaries, base, labels), build our
// layers, put them on the base as the image, verify it, write the package.
func Package(ctx context.Context, opts Options) (*Result, error) {
	start := time.Now()
	j, err := newJob(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer j.cleanup()
	if err := stage(ctx, j); err != nil {
		return nil, err
	}
	r, err := prepare(ctx, j)
	if err != nil {
		return nil, err
	}
	defer r.close()
	layers, err := buildOurLayers(j, r)
	if err != nil {
		return nil, err
	}
	img, tag, err := r.image(ctx, layers)
	if err != nil {
		return nil, err
	}
	verifiedIn, err := r.verify(ctx, img, tag)
	if err != nil {
		return nil, err
	}
	b := r.built(img, tag, layers, verifiedIn)
	res, err := write(j, b)
	if err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(start)
	res.ElapsedSeconds = res.Elapsed.Seconds()
	j.p.stage("wrote %s (image %s, %s compressed, %s uncompressed)", res.Dir, b.tag, humanBytes(res.Compressed), humanBytes(res.Uncompressed))
	return res, nil
}

// recipe is a kind's image once prepared: what its layers are, how they
// become the image, and how the image is verified. tt-go-server's
// (gopackage.go) and the Python kinds' (kindpackage.go) implement it.
type recipe interface {
	// layers plans our layers on the base; none when the Docker engine
	// builds the image.
	layers() ([]*oci.LayerPlan, error)
	// image makes the image from the built layers and names it.
	image(ctx context.Context, layers []oci.LayerBlob) (img v1.Image, tag string, err error)
	// verify runs the checks in the image and says where they ran.
	verify(ctx context.Context, img v1.Image, tag string) (verifiedIn string, err error)
	// built is what the recipe made, for the package's files and summary.
	built(img v1.Image, tag string, layers []oci.LayerBlob, verifiedIn string) *built
	// close releases what prepare opened (the engine connection).
	close()
}

// stage copies the manifest's code into the package's code/.
func stage(ctx context.Context, j *job) error {
	m, p := j.m, j.p
	p.stage("staging code/")
	var err error
	if j.code, err = stageCode(ctx, m, sourceRoots{workDir: j.workDir, scratch: j.scratch, output: j.output}, j.staged.CodeTree()); err != nil {
		return err
	}
	if j.code.RecordedOnly {
		p.stage("source.code: %d path(s) of %s recorded, not staged: kind %s ships no tt-metal and the tree is not a local checkout",
			len(m.Source.Code), m.Source.TTMetal.String(), m.Kind)
	}
	if line := skippedSummary(j.code.Skipped); line != "" {
		p.stage("%s", line)
	}
	return nil
}

// prepare resolves what the kind's image is made of.
func prepare(ctx context.Context, j *job) (recipe, error) {
	if j.m.Kind == manifest.KindGoServer {
		return prepareGoServer(ctx, j)
	}
	return prepareKind(ctx, j)
}

// buildOurLayers writes the recipe's planned layers as blobs (none for an
// image the engine builds).
func buildOurLayers(j *job, r recipe) ([]oci.LayerBlob, error) {
	plans, err := r.layers()
	if err != nil || len(plans) == 0 {
		return nil, err
	}
	return buildLayers(plans, j.epoch)
}

// write lays out the package in the staging directory (the OCI layout, the
// wire manifest, the card) and renames it into place.
func write(j *job, b *built) (*Result, error) {
	m, p := j.m, j.p
	digest, err := b.image.Digest()
	if err != nil {
		return nil, fmt.Errorf("image digest: %w", err)
	}
	configDigest, err := b.image.ConfigName()
	if err != nil {
		return nil, fmt.Errorf("config digest: %w", err)
	}
	p.stage("writing the OCI layout")
	layoutDir := j.staged.LayoutPath()
	if err := linkBlobs(layoutDir, b.blobFiles); err != nil {
		return nil, err
	}
	if err := oci.WriteLayout(layoutDir, b.image, b.tag); err != nil {
		return nil, err
	}

	// wire manifest and card
	b.record["image"] = b.tag
	b.record["image_digest"] = digest.String()
	hostname, _ := os.Hostname()
	wire := m.ToWire(manifest.WireInfo{ImageTag: b.tag, Digest: digest.String(), TTMetalVersion: j.code.TTMetal.SCMVersion,
		ToolVersion: j.opts.ToolVersion, CreatedAt: j.builtAt(), Hostname: hostname, Built: b.record})
	if b.runtime != nil {
		wire.Container.Runtime = b.runtime
	}
	warnings, err := writeWireAndCard(j.staged, wire)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		p.stage("warning: %s", w)
	}

	final := filepath.Join(j.outDir, m.Name)
	res, err := newResult(final, digest, configDigest, j, b, warnings)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(j.stagingDir, 0o755); err != nil { // MkdirTemp made it 0700
		return nil, err
	}
	if err := replaceDir(j.stagingDir, final); err != nil {
		return nil, err
	}
	return res, nil
}

// job is one package build: the inputs resolved once, the staging and
// scratch directories, and the staged code/, shared by the kinds' builders.
type job struct {
	opts       Options
	m          *manifest.Manifest
	p          *progress
	workDir    string
	outDir     string
	profile    manifest.Profile
	launch     manifest.Launch
	epoch      time.Time
	stagingDir string            // becomes <out>/<name>/
	staged     *builtpkg.Package // the package at stagingDir
	scratch    string            // removed at the end
	output     ownOutput
	code       stagedCode
	// baseRef is --base, else runtime.base ("" when neither).
	baseRef string
}

func newJob(ctx context.Context, opts Options) (*job, error) {
	m := opts.Manifest
	j := &job{opts: opts, m: m, p: newProgress(opts.Log), workDir: opts.WorkDir, outDir: opts.OutDir}
	if j.workDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		j.workDir = wd
	}
	if j.outDir == "" {
		j.outDir = "build"
	}
	if !filepath.IsAbs(j.outDir) {
		j.outDir = filepath.Join(j.workDir, j.outDir)
	}
	var err error
	if j.profile, err = m.ResolveProfile(opts.Profile); err != nil {
		return nil, fmt.Errorf("--profile: %w", err)
	}
	if j.launch, err = manifest.LaunchFor(m.Kind, m.Runtime, m.Weights.Repo, j.profile); err != nil {
		return nil, err
	}
	if j.epoch, err = sourceDateEpoch(ctx, opts.SourceDateEpoch, filepath.Dir(absPath(j.workDir, m.File))); err != nil {
		return nil, err
	}
	j.baseRef = opts.Base
	if j.baseRef == "" {
		j.baseRef = stringOf(m.Runtime["base"])
	}
	j.p.stage("packaging %s (kind %s, profile %s, SOURCE_DATE_EPOCH=%d)", m.Name, m.Kind, j.profile.Name, j.epoch.Unix())
	if err := os.MkdirAll(j.outDir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", j.outDir, err)
	}
	realOut, err := fslink.OnHost(j.outDir)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", j.outDir, err)
	}
	j.output = ownOutput{dir: realOut, name: m.Name}
	for _, stale := range append(removeStaleTempDirs(j.outDir, partialPrefix(m.Name)), removeStaleTempDirs(os.TempDir(), scratchPrefix)...) {
		j.p.stage("removed %s, left by a package run that was killed", stale)
	}
	if j.stagingDir, err = ownedTempDir(j.outDir, partialPrefix(m.Name)); err != nil {
		return nil, fmt.Errorf("create staging directory: %w", err)
	}
	j.staged = builtpkg.At(j.stagingDir)
	if j.scratch, err = ownedTempDir(os.TempDir(), scratchPrefix); err != nil {
		os.RemoveAll(j.stagingDir)
		return nil, fmt.Errorf("create scratch directory: %w", err)
	}
	return j, nil
}

func (j *job) cleanup() {
	os.RemoveAll(j.stagingDir)
	os.RemoveAll(j.scratch)
}

func (j *job) builtAt() string { return j.epoch.UTC().Format(time.RFC3339) }

// baseField names where the base was given, for errors.
func (j *job) baseField() string {
	if j.opts.Base != "" {
		return "--base"
	}
	return "runtime.base"
}

// baseAt is where to open the base: a relative path made absolute against
// the working directory (the ref itself goes into labels unchanged).
func (j *job) baseAt() string {
	ref := j.baseRef
	if ref != "" && ref != "scratch" && isLocalPathRef(j.workDir, ref) && !filepath.IsAbs(ref) {
		return filepath.Join(j.workDir, ref)
	}
	return ref
}

// manifestLabel is the resolved manifest as the image label carries it,
// without the image's own name and digest (they depend on the label) nor a
// host name.
func (j *job) manifestLabel(record, runtime map[string]any) (string, error) {
	w := j.m.ToWire(manifest.WireInfo{TTMetalVersion: j.code.TTMetal.SCMVersion, ToolVersion: j.opts.ToolVersion,
		CreatedAt: j.builtAt(), Built: record})
	if runtime != nil {
		w.Container.Runtime = runtime
	}
	b, err := json.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("encode the manifest label: %w", err)
	}
	return string(b), nil
}

// record starts the wire manifest's built block: what every kind records
// (the kind's builder adds its own).
func (j *job) record(baseRef, baseDigest, builtWith string) map[string]any {
	return map[string]any{
		"repo":             j.m.Repo,
		"tt_model_version": j.opts.ToolVersion,
		"created_at":       j.builtAt(),
		"tt_metal":         j.code.TTMetal.asMap(),
		"code_sha256":      j.code.SHA256,
		"profile":          j.profile.Name,
		"base":             map[string]any{"ref": baseRef, "digest": baseDigest},
		"built_with":       builtWith,
	}
}

// built is what a kind's builder made, verified.
type built struct {
	image v1.Image
	tag   string
	// layers are ours (the base's are not listed).
	layers     []oci.LayerBlob
	baseRef    string
	verifiedIn string
	builtWith  string
	// record is the wire manifest's built block, less image and digest.
	record map[string]any
	// runtime replaces the manifest's runtime in the wire manifest when the
	// build pinned refs in it (nil: unchanged).
	runtime   map[string]any
	binaries  []BinaryInfo
	libraries []string
	// baseUncompressed is the base's size as tars (-1: count it).
	baseUncompressed int64
	// blobFiles are blobs of the image already on disk, by digest hex.
	blobFiles map[string]string
}

// writeWireAndCard writes tt_kernel_manifest.json, then README.md rendered
// from the file just written, so `tt-model card` on the staged package gives
// the same README. It returns the card's warnings.
func writeWireAndCard(pkg *builtpkg.Package, wire *manifest.Wire) ([]string, error) {
	if err := wire.WriteFile(pkg.Path); err != nil {
		return nil, err
	}
	written, err := builtpkg.Read(pkg.Dir)
	if err != nil {
		return nil, err
	}
	readme, warnings, err := card.Render(written.Wire)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(pkg.CardPath(), []byte(readme), 0o644); err != nil {
		return nil, fmt.Errorf("write README.md: %w", err)
	}
	return warnings, nil
}

// newResult summarises a finished package.
func newResult(dir string, digest, configDigest v1.Hash, j *job, b *built, warnings []string) (*Result, error) {
	res := &Result{
		Name: filepath.Base(dir), Dir: dir, Kind: j.m.Kind, Image: b.tag, Digest: digest.String(), ConfigDigest: configDigest.String(),
		Profile: j.profile.Name, Base: b.baseRef, BuiltWith: b.builtWith, SourceDateEpoch: j.epoch.Unix(),
		Binaries: b.binaries, Libraries: nonNilStrings(b.libraries),
		CodeSHA256: j.code.SHA256, CodeSkipped: nonNilStrings(j.code.Skipped), VerifiedIn: b.verifiedIn, Warnings: nonNilStrings(warnings),
	}
	for _, l := range b.layers {
		d, err := l.Layer.Digest()
		if err != nil {
			return nil, err
		}
		res.Layers = append(res.Layers, LayerInfo{Digest: d.String(), Description: l.Description, Compressed: l.Compressed, Uncompressed: l.Uncompressed})
	}
	var err error
	if res.Compressed, res.Uncompressed, err = imageSizes(b.image, b.layers, b.baseUncompressed); err != nil {
		return nil, err
	}
	return res, nil
}

// placedBinary is a binary and where it goes in the image.
type placedBinary struct {
	bin       binary
	imagePath string
}

// closureOf merges the ELF closures of the binaries.
func closureOf(search *oci.LibSearch, bins []placedBinary) (oci.Closure, []BinaryInfo, error) {
	var merged oci.Closure
	seen := map[string]bool{}
	var infos []BinaryInfo
	for _, b := range bins {
		c, err := search.ResolveELFClosure(b.bin.HostPath, b.imagePath)
		if err != nil {
			return oci.Closure{}, nil, err
		}
		if c.Interpreter != nil {
			if merged.Interpreter != nil && merged.Interpreter.ImagePath != c.Interpreter.ImagePath {
				return oci.Closure{}, nil, fmt.Errorf("%s wants the loader %s, another binary %s", b.bin.HostPath, c.Interpreter.ImagePath, merged.Interpreter.ImagePath)
			}
			merged.Interpreter = c.Interpreter
		}
		for _, l := range c.Libraries {
			if !seen[l.ImagePath] {
				seen[l.ImagePath] = true
				merged.Libraries = append(merged.Libraries, l)
			}
		}
		sum, size, err := fileSHA256(b.bin.HostPath)
		if err != nil {
			return oci.Closure{}, nil, err
		}
		infos = append(infos, BinaryInfo{ImagePath: b.imagePath, From: b.bin.From, Size: size, SHA256: sum, Static: c.Static()})
	}
	sort.Slice(merged.Libraries, func(i, j int) bool { return merged.Libraries[i].ImagePath < merged.Libraries[j].ImagePath })
	return merged, infos, nil
}

func fileSHA256(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("hash %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// sourceDateEpoch parses $SOURCE_DATE_EPOCH, else takes the commit time of
// the checkout holding the manifest, else the Unix epoch (as ko does).
func sourceDateEpoch(ctx context.Context, env, dir string) (time.Time, error) {
	if env != "" {
		sec, err := strconv.ParseInt(strings.TrimSpace(env), 10, 64)
		if err != nil || sec < 0 {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want a non-negative number of seconds", env)
		}
		return time.Unix(sec, 0).UTC(), nil
	}
	if t, ok := commitTime(ctx, dir); ok {
		return t, nil
	}
	return time.Unix(0, 0).UTC(), nil
}

// gitRevision is HEAD of the package's checkout, for the revision label.
func gitRevision(ctx context.Context, dir string) string {
	s, _ := git(ctx, dir, "rev-parse", "HEAD")
	return s
}

// replaceDir moves staged into final, keeping the old final until the new
// one is in place.
func replaceDir(staged, final string) error {
	old := ""
	if _, err := os.Lstat(final); err == nil {
		old = staged + ".old"
		if err := os.Rename(final, old); err != nil {
			return fmt.Errorf("move the previous %s aside: %w", final, err)
		}
	}
	if err := os.Rename(staged, final); err != nil {
		if old != "" {
			_ = os.Rename(old, final)
		}
		return fmt.Errorf("move the new package into %s: %w", final, err)
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("remove the previous package: %w", err)
		}
	}
	return nil
}

// imageSizes adds up the image's layers: ours from what building them
// counted, the others' compressed sizes from the manifest and their tar
// sizes from baseUncompressed, or by reading them when it is -1.
func imageSizes(img v1.Image, ours []oci.LayerBlob, baseUncompressed int64) (compressed, uncompressed int64, err error) {
	layers, err := img.Layers()
	if err != nil {
		return 0, 0, err
	}
	baseLayers := len(layers) - len(ours)
	for _, l := range layers[:baseLayers] {
		n, err := l.Size()
		if err != nil {
			return 0, 0, err
		}
		compressed += n
		if baseUncompressed >= 0 {
			continue
		}
		rc, err := l.Uncompressed()
		if err != nil {
			return 0, 0, err
		}
		u, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return 0, 0, err
		}
		uncompressed += u
	}
	if baseUncompressed > 0 {
		uncompressed += baseUncompressed
	}
	for _, l := range ours {
		compressed += l.Compressed
		uncompressed += l.Uncompressed
	}
	return compressed, uncompressed, nil
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

func orScratch(s string) string {
	if s == "" {
		return "scratch"
	}
	return s
}

func absPath(workDir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(workDir, p)
}

// isLocalPathRef says whether runtime.base names a file or directory rather
// than a registry reference.
func isLocalPathRef(workDir, ref string) bool {
	if strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, "./") || strings.HasPrefix(ref, "../") {
		return true
	}
	_, err := os.Stat(filepath.Join(workDir, ref))
	return err == nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// imageTag is the name of a package's image: tt-model/<name>:<digest[:12]>,
// the tag upstream's retag_to_digest gives, so a tag always names content.
func imageTag(name string, digest v1.Hash) string {
	return fmt.Sprintf("tt-model/%s:%s", name, shortHex(digest.Hex))
}
