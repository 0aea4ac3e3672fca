package hub

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ServerWeights is how one model server names its weights: the variable
// that points at a folder directly, the repo it serves when HF_MODEL is
// unset, and the file a weights folder must hold.
type ServerWeights struct {
	Model       string // what the error messages call the model, e.g. "pi0.5"
	OverrideVar string // PI05_WEIGHTS_DIR / TT_RF_DETR_WEIGHTS: a folder that wins when set
	DefaultRepo string // served when HF_MODEL is unset
	File        string // what a weights folder must hold
}

// The repos the two model servers serve when HF_MODEL is unset.
const (
	PI05Repo   = "lerobot/pi05_base"
	RFDETRRepo = "Roboflow/rf-detr-base"
)

// WeightsFor returns the weights naming of a runtime.model of kind
// tt-go-server ("pi05", "rf-detr"); ok is false for any other model.
func WeightsFor(model string) (ServerWeights, bool) {
	switch model {
	case "pi05":
		return ServerWeights{Model: "pi0.5", OverrideVar: "PI05_WEIGHTS_DIR", DefaultRepo: PI05Repo, File: "model.safetensors"}, true
	case "rf-detr":
		return ServerWeights{Model: "RF-DETR", OverrideVar: "TT_RF_DETR_WEIGHTS", DefaultRepo: RFDETRRepo, File: "model.safetensors"}, true
	}
	return ServerWeights{}, false
}

// WeightsLocation is where the weights were found and why.
type WeightsLocation struct {
	Dir      string // the folder holding the weights
	Repo     string // Hub repo id, when known (a cache lookup, or a snapshot path)
	Revision string // snapshot commit, when known
	Via      string // the setting that chose the folder, e.g. "HF_MODEL (repo id)"
}

// Locate is the one weights-location rule of tt-model: both model servers
// load through it and `tt-model serve` decides HF_MODEL with it.
//
//  1. the model's own variable (OverrideVar), when set, names the folder;
//  2. else HF_MODEL (default DefaultRepo) is a local folder (a path: it
//     starts with / or ., or exists) — a snapshot folder of an HF cache
//     also tells the repo and commit — or
//  3. a Hub repo id org/name, looked up in the HF cache (HF_HUB_CACHE, else
//     $HF_HOME/hub, else ~/.cache/huggingface/hub) at TT_WEIGHTS_REVISION,
//     else pin (the package's pinned revision; "" for a server, which is
//     told the pin through TT_WEIGHTS_REVISION), else "main". A commit is
//     its snapshot folder; a branch or tag goes through refs/.
//
// It never touches the network. When nothing is found the error names every
// place it looked, in that order.
func (w ServerWeights) Locate(getenv func(string) string, pin string) (WeightsLocation, error) {
	var looked []string
	miss := func(format string, args ...any) { looked = append(looked, fmt.Sprintf(format, args...)) }
	fail := func() (WeightsLocation, error) {
		return WeightsLocation{}, &WeightsNotFoundError{Model: w.Model, Looked: looked, Hint: w.hint()}
	}

	if w.OverrideVar != "" {
		if dir := getenv(w.OverrideVar); dir != "" {
			if why := w.checkDir(dir); why != "" {
				miss("%s=%s: %s", w.OverrideVar, dir, why)
				return fail()
			}
			return WeightsLocation{Dir: dir, Via: w.OverrideVar}, nil
		}
		miss("%s: unset", w.OverrideVar)
	}

	model, via := getenv("HF_MODEL"), "HF_MODEL"
	if model == "" {
		model, via = w.DefaultRepo, "the default repo (HF_MODEL unset)"
	}
	if model == "" {
		miss("HF_MODEL: unset, and no default repo")
		return fail()
	}
	if IsFolderName(model) {
		if why := w.checkDir(model); why != "" {
			miss("HF_MODEL=%s (a path): %s", model, why)
			return fail()
		}
		loc := WeightsLocation{Dir: model, Via: "HF_MODEL (a folder)"}
		loc.Repo, loc.Revision, _ = SnapshotOf(model)
		return loc, nil
	}
	if err := ValidateRepoID(model); err != nil || !strings.Contains(model, "/") {
		miss("%s=%s: neither a folder nor a Hub repo id org/name", via, model)
		return fail()
	}

	cfg, err := ConfigFromEnv(getenv)
	if err != nil {
		miss("the Hugging Face cache: %v", err)
		return fail()
	}
	cache := Cache{Dir: cfg.CacheDir}
	rev, revVia := getenv("TT_WEIGHTS_REVISION"), "TT_WEIGHTS_REVISION"
	switch {
	case rev != "":
	case pin != "":
		rev, revVia = pin, "the package's pin"
	default:
		rev, revVia = "main", "the default branch (TT_WEIGHTS_REVISION unset)"
	}
	commit := rev
	if !IsCommit(rev) {
		commit, err = cache.ReadRef(model, rev)
		if err != nil || commit == "" {
			ref := filepath.Join(cache.RepoDir(model), "refs", filepath.FromSlash(rev))
			why := "absent"
			if err != nil {
				why = err.Error()
			}
			miss("%s %s at %s %q in the HF cache: ref %s %s", via, model, revVia, rev, ref, why)
			return fail()
		}
	}
	dir := cache.SnapshotDir(model, commit)
	if why := w.checkDir(dir); why != "" {
		miss("%s %s at %s %s in the HF cache: snapshot %s %s", via, model, revVia, commit, dir, why)
		return fail()
	}
	return WeightsLocation{Dir: dir, Repo: model, Revision: commit, Via: via + " (repo id, " + revVia + ")"}, nil
}

// checkDir says why dir cannot be the weights folder ("" when it can).
func (w ServerWeights) checkDir(dir string) string {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "no such folder"
	case err != nil:
		return err.Error()
	case !st.IsDir():
		return "not a folder"
	}
	if w.File == "" {
		return ""
	}
	if _, err := os.Stat(filepath.Join(dir, w.File)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "has no " + w.File
		}
		return err.Error()
	}
	return ""
}

func (w ServerWeights) hint() string {
	over := ""
	if w.OverrideVar != "" {
		over = fmt.Sprintf("set %s=<folder with %s>, or ", w.OverrideVar, w.File)
	}
	return over + "put the pinned weights in the HF cache (tt-model weights pull, or weights import for local files)"
}

// WeightsNotFoundError lists every place a weights lookup tried.
type WeightsNotFoundError struct {
	Model  string
	Looked []string
	Hint   string
}

func (e *WeightsNotFoundError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no %s weights found; looked at:", e.Model)
	for i, l := range e.Looked {
		fmt.Fprintf(&b, "\n  %d. %s", i+1, l)
	}
	b.WriteString("\n" + e.Hint)
	return b.String()
}

// isPathLike reports whether HF_MODEL names a folder rather than a repo id:
// absolute or explicitly relative, or an existing folder (as huggingface_hub
// and transformers treat an existing local path first).
func IsFolderName(s string) bool {
	if strings.HasPrefix(s, "/") || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") || s == "." || s == ".." {
		return true
	}
	st, err := os.Stat(s)
	return err == nil && st.IsDir()
}

// SnapshotOf reads the repo id and commit out of an HF cache snapshot folder
// (…/models--org--name/snapshots/<commit>); ok is false for any other path.
func SnapshotOf(dir string) (repo, commit string, ok bool) {
	clean := filepath.Clean(dir)
	commit = filepath.Base(clean)
	snaps := filepath.Dir(clean)
	folder := filepath.Base(filepath.Dir(snaps))
	if filepath.Base(snaps) != "snapshots" || !strings.HasPrefix(folder, "models--") {
		return "", "", false
	}
	org, name, found := strings.Cut(strings.TrimPrefix(folder, "models--"), "--")
	if !found || org == "" || name == "" {
		return "", "", false
	}
	return org + "/" + name, commit, true
}

// ModelID is the id a server reports for HF_MODEL (OpenAI's /v1/models, the
// seed's /health "model"): the repo id, also when HF_MODEL is the snapshot
// folder `tt-model serve` passes; defaultRepo when unset.
func ModelID(hfModel, defaultRepo string) string {
	if hfModel == "" {
		return defaultRepo
	}
	if repo, _, ok := SnapshotOf(hfModel); ok && IsFolderName(hfModel) {
		return repo
	}
	return hfModel
}
