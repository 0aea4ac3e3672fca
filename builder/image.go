package builder

import (
	"archive/tar"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/ttmodel/tt-model/builder/kind"
	"github.com/ttmodel/tt-model/builder/oci"
)

// Image-side directories the runtime writes to or mounts over.
const (
	ImageHomeDir  = kind.HomeDir // the tt account's home
	ImageCacheDir = "/cache"     // TT_METAL_CACHE, a host directory under serve
	ImageHFDir    = "/hf"        // HF_HOME, the host's Hugging Face cache under serve
	defaultPATH   = "/usr/local/bin:/usr/bin:/bin"
	historyStamp  = "tt-model package"
)

// imageSpec is everything the image is made of.
type imageSpec struct {
	Base       *baseImage
	Server     binary
	Tool       binary
	Closure    oci.Closure // of both binaries together
	Entrypoint []string
	Cmd        []string
	Env        map[string]string // on top of the base's env
	Port       int
	Labels     map[string]string
	Epoch      time.Time
}

// goServerLayers plans our layers on the base: accounts and writable
// directories, the shared-library closure (when a binary is dynamic), then
// tt-model and tt-model-server (the layer that changes most goes last).
// stackLayers gives each a history entry and the image its config.
func goServerLayers(fs *oci.Rootfs, spec imageSpec) ([]*oci.LayerPlan, error) {
	var plans []*oci.LayerPlan

	accounts, err := accountsLayer(fs, spec.Base, "the tt user (uid 1000) and its writable /home/tt, /cache, /hf", 0o755)
	if err != nil {
		return nil, err
	}
	plans = append(plans, accounts)

	if !spec.Closure.Static() {
		libs := fs.Plan(fmt.Sprintf("the shared libraries of the binaries (%d) and the loader", len(spec.Closure.Libraries)))
		if in := spec.Closure.Interpreter; in != nil {
			if err := addHostFile(libs, in.ImagePath, in.HostPath); err != nil {
				return nil, err
			}
		}
		for _, l := range spec.Closure.Libraries {
			if err := addHostFile(libs, l.ImagePath, l.HostPath); err != nil {
				return nil, err
			}
		}
		plans = append(plans, libs.Done())
	}

	for _, b := range []struct {
		bin       binary
		imagePath string
	}{{spec.Tool, ImageToolPath}, {spec.Server, ImageServerPath}} {
		p := fs.Plan(fmt.Sprintf("%s (%s)", b.imagePath, b.bin.From))
		p.Add(oci.HostFileEntry(b.imagePath, 0o755, b.bin.HostPath))
		plans = append(plans, p.Done())
	}
	return plans, nil
}

// stackLayers puts our built layers on the base, each with a history entry,
// sets the config (config maps the base's to ours) and every time stamp to
// the epoch, and annotates the image with its base.
func stackLayers(base *baseImage, layers []oci.LayerBlob, epoch time.Time, config func(v1.Config) v1.Config, progress *progress) (v1.Image, error) {
	adds := make([]mutate.Addendum, 0, len(layers))
	for _, l := range layers {
		progress.layer(l)
		adds = append(adds, mutate.Addendum{
			Layer: l.Layer,
			History: v1.History{
				Created:   v1.Time{Time: epoch},
				CreatedBy: historyStamp + ": " + l.Description,
				Comment:   fmt.Sprintf("%d files", l.Files),
			},
		})
	}
	img, err := mutate.Append(base.Image, adds...)
	if err != nil {
		return nil, fmt.Errorf("append layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = oci.Platform.OS
	cf.Architecture = oci.Platform.Architecture
	cf.Author = "tt-model"
	cf.Config = config(cf.Config)
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if img, err = mutate.CreatedAt(img, v1.Time{Time: epoch}); err != nil {
		return nil, fmt.Errorf("created: %w", err)
	}
	if base.Scratch() {
		return img, nil
	}
	annotated, ok := mutate.Annotations(img, map[string]string{
		"org.opencontainers.image.base.name":   base.Ref,
		"org.opencontainers.image.base.digest": base.Digest,
	}).(v1.Image)
	if !ok {
		return nil, fmt.Errorf("annotate the image with its base")
	}
	return annotated, nil
}

// addHostFile copies a host file into the layer with its mode normalised.
func addHostFile(l *oci.LayerPlan, imagePath, hostPath string) error {
	info, err := os.Stat(hostPath)
	if err != nil {
		return fmt.Errorf("stat %s: %w", hostPath, err)
	}
	l.Add(oci.Entry{Path: imagePath, Type: tar.TypeReg, Mode: oci.HostFileMode(info), Source: hostPath})
	return nil
}

// imageConfig merges our settings over the base's: env by key (ours win),
// labels by key, and the fields we own replaced outright.
func imageConfig(base v1.Config, spec imageSpec) v1.Config {
	cfg := base
	env := map[string]string{}
	for _, kv := range base.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	// Our binaries live in /usr/local/bin: keep it on a base's PATH.
	switch p, ok := env["PATH"]; {
	case !ok || p == "":
		env["PATH"] = defaultPATH
	case !slices.Contains(strings.Split(p, ":"), "/usr/local/bin"):
		env["PATH"] = "/usr/local/bin:" + p
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	cfg.Env = make([]string, 0, len(env))
	for k, v := range env {
		cfg.Env = append(cfg.Env, k+"="+v)
	}
	sort.Strings(cfg.Env)

	cfg.Entrypoint = spec.Entrypoint
	cfg.Cmd = spec.Cmd
	cfg.User = fmt.Sprintf("%d:%d", ImageUID, ImageGID)
	cfg.WorkingDir = ImageHomeDir
	cfg.ExposedPorts = map[string]struct{}{strconv.Itoa(spec.Port) + "/tcp": {}}
	cfg.Labels = mergeLabels(base.Labels, spec.Labels)
	return cfg
}
