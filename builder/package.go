// Package builder turns a tt-model.yaml of kind tt-go-server into a staged
// package (code/, an OCI image layout, the model card and the wire
// manifest) with go-containerregistry and no daemon, verifies the image,
// renders cards, and pushes images to OCI registries. The shape follows
// go-containerregistry: stage → layers → image → sinks (layout, engine,
// registry), each sink its own file.
package builder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/ttmodel/tt-model/manifest"
)

// ErrKindNotBuilt marks a valid manifest of a kind this version cannot build.
var ErrKindNotBuilt = errors.New("kind not built by this version")

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
	Profile     string             // the profile whose env the image carries; "" = default
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
	Log             io.Writer // progress; nil = silent
}

// Result is what Package made; it is also the --json summary.
type Result struct {
	Name            string        `json:"name"`
	Dir             string        `json:"dir"`
	Image           string        `json:"image"`
	Digest          string        `json:"digest"`
	ConfigDigest    string        `json:"config_digest"`
	Profile         string        `json:"profile"`
	Base            string        `json:"base"`
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

// Package builds <out>/<name>/ for a tt-go-server manifest. Everything is
// made in a temporary directory beside the output and renamed into place
// only after verify passed, so a failure leaves the previous package intact.
func Package(ctx context.Context, opts Options) (*Result, error) {
	start := time.Now()
	m := opts.Manifest
	if m.Kind != manifest.KindGoServer {
		return nil, fmt.Errorf("kind %s is validated but not built by this version (it builds %s): %w", m.Kind, manifest.KindGoServer, ErrKindNotBuilt)
	}
	p := newProgress(opts.Log)
	workDir := opts.WorkDir
	if workDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		workDir = wd
	}
	outDir := opts.OutDir
	if outDir == "" {
		outDir = "build"
	}
	if !filepath.IsAbs(outDir) {
		outDir = filepath.Join(workDir, outDir)
	}
	profile, err := m.ResolveProfile(opts.Profile)
	if err != nil {
		return nil, fmt.Errorf("--profile: %w", err)
	}
	launch, err := manifest.LaunchFor(m.Kind, m.Runtime, m.Weights.Repo, profile)
	if err != nil {
		return nil, err
	}
	epoch, err := sourceDateEpoch(ctx, opts.SourceDateEpoch, filepath.Dir(absPath(workDir, m.File)))
	if err != nil {
		return nil, err
	}
	p.stage("packaging %s (kind %s, profile %s, SOURCE_DATE_EPOCH=%d)", m.Name, m.Kind, profile.Name, epoch.Unix())

	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", outDir, err)
	}
	for _, stale := range append(removeStaleTempDirs(outDir, "."+m.Name+".partial-"), removeStaleTempDirs(os.TempDir(), scratchPrefix)...) {
		p.stage("removed %s, left by a package run that was killed", stale)
	}
	stagingDir, err := ownedTempDir(outDir, "."+m.Name+".partial-")
	if err != nil {
		return nil, fmt.Errorf("create staging directory: %w", err)
	}
	defer os.RemoveAll(stagingDir)
	scratch, err := ownedTempDir(os.TempDir(), scratchPrefix)
	if err != nil {
		return nil, fmt.Errorf("create scratch directory: %w", err)
	}
	defer os.RemoveAll(scratch)

	// code/
	p.stage("staging code/")
	code, err := stageCode(ctx, m, sourceRoots{workDir: workDir, scratch: scratch}, filepath.Join(stagingDir, "code"))
	if err != nil {
		return nil, err
	}
	if code.RecordedOnly {
		p.stage("source.code: %d path(s) of %s recorded, not staged: kind %s ships no tt-metal and the tree is not a local checkout",
			len(m.Source.Code), m.Source.TTMetal.String(), m.Kind)
	}
	for _, s := range code.Skipped {
		p.stage("code/: skipped %s (build detritus or weights)", s)
	}

	// binaries
	serverPath := stringOf(m.Runtime["server"])
	if serverPath != "" && !filepath.IsAbs(serverPath) {
		serverPath = filepath.Join(workDir, serverPath)
	}
	buildDir := filepath.Join(scratch, "bin")
	if err := os.MkdirAll(buildDir, 0o755); err != nil {
		return nil, err
	}
	p.stage("locating tt-model-server and tt-model")
	server, tool, err := locateBinaries(ctx, binaryPlan{
		ServerPath: serverPath, Executable: opts.Executable,
		SearchDirs: []string{filepath.Dir(absPath(workDir, m.File)), workDir},
		BuildDir:   buildDir, Log: p.writer(),
	})
	if err != nil {
		return nil, err
	}
	search, err := newLibSearch("/")
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

	// image
	baseRef := stringOf(m.Runtime["base"])
	baseAt := baseRef
	if baseRef != "" && baseRef != "scratch" && isLocalPathRef(workDir, baseRef) && !filepath.IsAbs(baseRef) {
		baseAt = filepath.Join(workDir, baseRef)
	}
	p.stage("base image: %s", orScratch(baseRef))
	base, err := loadBase(ctx, baseRef, baseAt, filepath.Join(scratch, "base-layers"))
	if err != nil {
		return nil, err
	}
	env := map[string]string{"HF_HOME": ImageHFDir, "TT_METAL_CACHE": ImageCacheDir, "HOME": ImageHomeDir}
	for k, v := range launch.Env {
		env[k] = v
	}
	if extra := closure.extraLibraryPath(); len(extra) > 0 {
		env["LD_LIBRARY_PATH"] = strings.Join(extra, ":")
	}
	cmd := append([]string{ImageServerPath}, launch.Argv[1:]...)

	builtAt := epoch.UTC().Format(time.RFC3339)
	built := map[string]any{
		"repo":             m.Repo,
		"tt_model_version": opts.ToolVersion,
		"created_at":       builtAt,
		"tt_metal":         code.TTMetal.asMap(),
		"code_sha256":      code.SHA256,
		"profile":          profile.Name,
		"base":             map[string]any{"ref": base.Ref, "digest": base.Digest},
		"server":           map[string]any{"from": binInfo[1].From, "sha256": binInfo[1].SHA256, "static": binInfo[1].Static},
		"tool":             map[string]any{"from": binInfo[0].From, "sha256": binInfo[0].SHA256, "static": binInfo[0].Static},
	}
	// The label carries the resolved manifest without the image's own name
	// and digest (they depend on the label) nor a host name.
	labelWire := m.ToWire(manifest.WireInfo{TTMetalVersion: code.TTMetal.SCMVersion, ToolVersion: opts.ToolVersion,
		CreatedAt: builtAt, Built: built})
	manifestJSON, err := json.Marshal(labelWire)
	if err != nil {
		return nil, fmt.Errorf("encode the manifest label: %w", err)
	}
	spec := imageSpec{
		Base: base, Server: server, Tool: tool, Closure: closure,
		Entrypoint: []string{ImageToolPath, "supervise", "--"},
		Cmd:        cmd,
		Env:        env,
		Port:       launch.Port,
		Labels:     imageLabels(m, code, string(manifestJSON), builtAt, gitRevision(ctx, filepath.Dir(absPath(workDir, m.File)))),
		Epoch:      epoch,
	}
	p.stage("assembling the image")
	bi, err := assembleImage(spec, p)
	if err != nil {
		return nil, err
	}
	digest, err := bi.Image.Digest()
	if err != nil {
		return nil, fmt.Errorf("image digest: %w", err)
	}
	configDigest, err := bi.Image.ConfigName()
	if err != nil {
		return nil, fmt.Errorf("config digest: %w", err)
	}
	tag := imageTag(m.Name, digest)
	p.stage("image %s (%s)", tag, digest)

	p.stage("writing the OCI layout")
	if err := writeLayout(filepath.Join(stagingDir, "image"), bi.Image, tag); err != nil {
		return nil, err
	}

	// verify
	where, err := verifyImage(ctx, opts.Verify, bi, tag, m.Verify, scratch, p)
	if err != nil {
		return nil, err
	}

	// wire manifest and card
	built["image"] = tag
	built["image_digest"] = digest.String()
	hostname, _ := os.Hostname()
	wire := m.ToWire(manifest.WireInfo{ImageTag: tag, Digest: digest.String(), TTMetalVersion: code.TTMetal.SCMVersion,
		ToolVersion: opts.ToolVersion, CreatedAt: builtAt, Hostname: hostname, Built: built})
	warnings, err := writeWireAndCard(stagingDir, wire)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		p.stage("warning: %s", w)
	}

	final := filepath.Join(outDir, m.Name)
	res, err := newResult(final, tag, digest, configDigest, profile.Name, base.Ref, epoch, binInfo, code, where, warnings, bi, closure)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(stagingDir, 0o755); err != nil { // MkdirTemp made it 0700
		return nil, err
	}
	if err := replaceDir(stagingDir, final); err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(start)
	res.ElapsedSeconds = res.Elapsed.Seconds()
	p.stage("wrote %s (image %s, %s compressed, %s uncompressed)", final, tag, humanBytes(res.Compressed), humanBytes(res.Uncompressed))
	return res, nil
}

// writeWireAndCard writes tt_kernel_manifest.json, then README.md rendered
// from the file just written, so `tt-model card` on the staged package gives
// the same README. It returns the card's warnings.
func writeWireAndCard(dir string, wire *manifest.Wire) ([]string, error) {
	if err := wire.WriteFile(filepath.Join(dir, manifest.WireFile)); err != nil {
		return nil, err
	}
	written, err := manifest.ReadWire(dir)
	if err != nil {
		return nil, err
	}
	readme, warnings, err := RenderCard(written)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(readme), 0o644); err != nil {
		return nil, fmt.Errorf("write README.md: %w", err)
	}
	return warnings, nil
}

// newResult summarises a finished package.
func newResult(dir, tag string, digest, configDigest v1.Hash, profile, base string, epoch time.Time, bins []BinaryInfo,
	code stagedCode, verifiedIn string, warnings []string, bi builtImage, closure elfClosure) (*Result, error) {
	res := &Result{
		Name: filepath.Base(dir), Dir: dir, Image: tag, Digest: digest.String(), ConfigDigest: configDigest.String(),
		Profile: profile, Base: base, SourceDateEpoch: epoch.Unix(), Binaries: bins,
		CodeSHA256: code.SHA256, CodeSkipped: nonNilStrings(code.Skipped), VerifiedIn: verifiedIn, Warnings: nonNilStrings(warnings),
	}
	for _, l := range bi.Layers {
		d, err := l.Layer.Digest()
		if err != nil {
			return nil, err
		}
		res.Layers = append(res.Layers, LayerInfo{Digest: d.String(), Description: l.Description, Compressed: l.Compressed, Uncompressed: l.Uncompressed})
	}
	var err error
	if res.Compressed, res.Uncompressed, err = imageSizes(bi); err != nil {
		return nil, err
	}
	if in := closure.Interpreter; in != nil {
		res.Libraries = append(res.Libraries, in.ImagePath)
	}
	for _, l := range closure.Libraries {
		res.Libraries = append(res.Libraries, l.ImagePath)
	}
	res.Libraries = nonNilStrings(res.Libraries)
	return res, nil
}

// placedBinary is a binary and where it goes in the image.
type placedBinary struct {
	bin       binary
	imagePath string
}

// closureOf merges the ELF closures of the binaries.
func closureOf(search *libSearch, bins []placedBinary) (elfClosure, []BinaryInfo, error) {
	var merged elfClosure
	seen := map[string]bool{}
	var infos []BinaryInfo
	for _, b := range bins {
		c, err := search.resolveELFClosure(b.bin.HostPath, b.imagePath)
		if err != nil {
			return elfClosure{}, nil, err
		}
		if c.Interpreter != nil {
			if merged.Interpreter != nil && merged.Interpreter.ImagePath != c.Interpreter.ImagePath {
				return elfClosure{}, nil, fmt.Errorf("%s wants the loader %s, another binary %s", b.bin.HostPath, c.Interpreter.ImagePath, merged.Interpreter.ImagePath)
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
			return elfClosure{}, nil, err
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
// counted, the base's by reading them.
func imageSizes(bi builtImage) (compressed, uncompressed int64, err error) {
	layers, err := bi.Image.Layers()
	if err != nil {
		return 0, 0, err
	}
	baseLayers := len(layers) - len(bi.Layers)
	for _, l := range layers[:baseLayers] {
		n, err := l.Size()
		if err != nil {
			return 0, 0, err
		}
		compressed += n
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
	for _, l := range bi.Layers {
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
