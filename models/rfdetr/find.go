package rfdetr

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// DefaultRepo is the Hub repository RF-DETR-base weights come from when
// HF_MODEL does not say.
const DefaultRepo = "Roboflow/rf-detr-base"

// Files of a weights directory.
const (
	WeightsFile = "model.safetensors"
	ConfigFile  = "config.json"
)

// Source says where the weights were found and why.
type Source struct {
	Dir      string // directory holding model.safetensors (and config.json)
	Repo     string // Hub repo id, when found through the HF cache
	Revision string // snapshot commit, when found through the HF cache
	Via      string // the setting that chose it, e.g. "TT_RF_DETR_WEIGHTS"
}

var commitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// FindWeights locates the weights directory:
//  1. TT_RF_DETR_WEIGHTS=<dir> (the offline override);
//  2. HF_MODEL naming a directory (a snapshot path) — used as is;
//  3. the local Hugging Face cache for HF_MODEL (default Roboflow/rf-detr-base)
//     at TT_WEIGHTS_REVISION (a commit, or a ref such as "main"; default
//     "main"): <hub>/models--org--name/snapshots/<commit>/, where <hub> is
//     $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub,
//     else ~/.cache/huggingface/hub.
//
// getenv is os.Getenv in production; the error lists every place looked at.
func FindWeights(getenv func(string) string) (Source, error) {
	if dir := getenv("TT_RF_DETR_WEIGHTS"); dir != "" {
		return Source{Dir: dir, Via: "TT_RF_DETR_WEIGHTS"}, checkDir(dir, "TT_RF_DETR_WEIGHTS")
	}
	repo := getenv("HF_MODEL")
	if repo != "" && isDir(repo) {
		return Source{Dir: repo, Via: "HF_MODEL"}, checkDir(repo, "HF_MODEL")
	}
	via := "HF_MODEL"
	if repo == "" {
		repo, via = DefaultRepo, "default repo (HF_MODEL unset)"
	}
	if strings.HasPrefix(repo, "/") || strings.HasPrefix(repo, ".") {
		return Source{}, fmt.Errorf("HF_MODEL=%s is a path but not a directory; set TT_RF_DETR_WEIGHTS=<dir with %s> or HF_MODEL=<org/name>", repo, WeightsFile)
	}
	org, name, ok := strings.Cut(repo, "/")
	if !ok || org == "" || name == "" || strings.Contains(name, "/") {
		return Source{}, fmt.Errorf("HF_MODEL=%q is neither a directory nor a Hub repo id org/name", repo)
	}
	hub, err := hubCache(getenv)
	if err != nil {
		return Source{}, err
	}
	repoDir := filepath.Join(hub, "models--"+org+"--"+name)
	rev := getenv("TT_WEIGHTS_REVISION")
	if rev == "" {
		rev = "main"
	}
	commit := rev
	if !commitRE.MatchString(rev) {
		ref, err := os.ReadFile(filepath.Join(repoDir, "refs", rev))
		if err != nil {
			return Source{}, fmt.Errorf("weights for %s (via %s) at revision %q: no ref %s in the Hugging Face cache (%v); "+
				"download them (tt-model weights pull) or set TT_RF_DETR_WEIGHTS=<dir with %s and %s>",
				repo, via, rev, filepath.Join(repoDir, "refs", rev), err, WeightsFile, ConfigFile)
		}
		commit = strings.TrimSpace(string(ref))
	}
	dir := filepath.Join(repoDir, "snapshots", commit)
	src := Source{Dir: dir, Repo: repo, Revision: commit, Via: via}
	if !isDir(dir) {
		return src, fmt.Errorf("weights for %s (via %s) at revision %s: snapshot %s is not in the Hugging Face cache; "+
			"download them (tt-model weights pull) or set TT_RF_DETR_WEIGHTS=<dir with %s and %s>",
			repo, via, commit, dir, WeightsFile, ConfigFile)
	}
	return src, checkDir(dir, "snapshot of "+repo+"@"+commit)
}

func hubCache(getenv func(string) string) (string, error) {
	if d := getenv("HF_HUB_CACHE"); d != "" {
		return d, nil
	}
	if d := getenv("HF_HOME"); d != "" {
		return filepath.Join(d, "hub"), nil
	}
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface", "hub"), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("cannot locate the Hugging Face cache: HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME and HOME are all unset")
	}
	return filepath.Join(home, ".cache", "huggingface", "hub"), nil
}

func checkDir(dir, via string) error {
	if !isDir(dir) {
		return fmt.Errorf("weights directory %s (from %s) is not a directory", dir, via)
	}
	if _, err := os.Stat(filepath.Join(dir, WeightsFile)); err != nil {
		return fmt.Errorf("weights directory %s (from %s) has no %s: %w", dir, via, WeightsFile, err)
	}
	return nil
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}
