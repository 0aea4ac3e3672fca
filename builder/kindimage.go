package builder

import (
	"archive/tar"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/ttmodel/tt-model/builder/kind"
	"github.com/ttmodel/tt-model/builder/oci"
)

// kindLayers plans the daemonless build of a Python kind's context: the
// Dockerfile's steps as layers on the base, nothing run. The account step is
// computed from the base's files (as accountsShell would change them); the
// COPY steps become one layer each, the one that changes most (code/) last.
// stackLayers stamps every time with the epoch, so equal inputs give equal
// digests.
func kindLayers(fs *oci.Rootfs, c *kindContext, base *baseImage, tool binary, codeDir string) ([]*oci.LayerPlan, error) {
	var plans []*oci.LayerPlan

	// HOME is writable by any uid: `serve` runs the container as the host's.
	accounts, err := accountsLayer(fs, base, "the tt user (uid 1000), HOME, /cache and /hf", 0o1777)
	if err != nil {
		return nil, err
	}
	plans = append(plans, accounts)

	toolLayer := fs.Plan(fmt.Sprintf("%s (%s)", ImageToolPath, tool.From))
	toolLayer.Add(oci.HostFileEntry(ImageToolPath, 0o755, tool.HostPath))
	plans = append(plans, toolLayer.Done())

	scripts := fs.Plan("verify.sh and the serve scripts")
	scripts.Add(oci.FileEntry(verifyImagePath, 0o755, c.Files["verify.sh"]))
	for _, name := range c.ServeScripts {
		scripts.Add(oci.FileEntry(path.Join(serveScriptDir, name), 0o755, c.Files[name]))
	}
	plans = append(plans, scripts.Done())

	code := fs.Plan("code/ at " + kind.CodeDir)
	if err := addTree(code, codeDir, kind.CodeDir); err != nil {
		return nil, err
	}
	return append(plans, code.Done()), nil
}

// kindImageConfig applies the Dockerfile's ENV, LABEL, EXPOSE, USER, WORKDIR,
// ENTRYPOINT and CMD to the base's config, as a build would: env and labels
// by key over the base's, the rest replaced.
func kindImageConfig(base v1.Config, c kindConfig) v1.Config {
	cfg := base
	env := map[string]string{}
	var order []string
	for _, kv := range base.Env {
		k, v, _ := strings.Cut(kv, "=")
		if _, seen := env[k]; !seen {
			order = append(order, k)
		}
		env[k] = v
	}
	for _, kv := range c.Env {
		if _, seen := env[kv[0]]; !seen {
			order = append(order, kv[0])
		}
		env[kv[0]] = kv[1]
	}
	cfg.Env = make([]string, 0, len(order))
	for _, k := range order {
		cfg.Env = append(cfg.Env, k+"="+env[k])
	}
	cfg.Labels = mergeLabels(base.Labels, c.Labels)
	cfg.ExposedPorts = map[string]struct{}{strconv.Itoa(c.Port) + "/tcp": {}}
	cfg.User, cfg.WorkingDir = c.User, c.WorkDir
	cfg.Entrypoint, cfg.Cmd = c.Entrypoint, c.Cmd
	return cfg
}

// mergeLabels is the base's labels with over's set by key on top, as a
// build's LABEL lines apply; a new map, so the base's config is untouched.
func mergeLabels(base, over map[string]string) map[string]string {
	labels := make(map[string]string, len(base)+len(over))
	maps.Copy(labels, base)
	maps.Copy(labels, over)
	return labels
}

// addTree adds every directory, file and symlink under host dir to the
// layer at imageDir, as COPY dir/ imageDir/ would: root-owned, modes
// normalised, links kept as links.
func addTree(l *oci.LayerPlan, dir, imageDir string) error {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		if !d.IsDir() && !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
			return fmt.Errorf("code/%s is not a regular file, directory or symlink", filepath.ToSlash(rel))
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	sort.Strings(files)
	l.MkdirAll(imageDir)
	for _, p := range files {
		rel, _ := filepath.Rel(dir, p)
		target := path.Join(imageDir, filepath.ToSlash(rel))
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.IsDir():
			l.MkdirAll(target)
		case info.Mode()&fs.ModeSymlink != 0:
			// Staging checked that the link stays inside code/.
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			l.Add(oci.Entry{Path: target, Type: tar.TypeSymlink, Mode: 0o777, Linkname: link})
		default:
			l.Add(oci.HostFileEntry(target, oci.HostFileMode(info), p))
		}
	}
	return nil
}
