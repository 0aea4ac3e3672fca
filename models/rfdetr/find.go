package rfdetr

import "github.com/ttmodel/tt-model/hub"

// DefaultRepo is the Hub repository RF-DETR-base weights come from when
// HF_MODEL does not say.
const DefaultRepo = hub.RFDETRRepo

// Files of a weights directory.
const (
	WeightsFile = "model.safetensors"
	ConfigFile  = "config.json"
)

// Source says where the weights were found and why.
type Source struct {
	Dir      string // directory holding model.safetensors (and config.json)
	Repo     string // Hub repo id, when known (an HF cache lookup or snapshot folder)
	Revision string // snapshot commit, when known
	Via      string // the setting that chose it, e.g. "TT_RF_DETR_WEIGHTS"
}

// FindWeights locates the weights directory by tt-model's one rule
// (hub.ServerWeights.Locate): TT_RF_DETR_WEIGHTS, else HF_MODEL as a folder
// or as a repo id (default Roboflow/rf-detr-base) in the HF cache at
// TT_WEIGHTS_REVISION (default main). getenv is os.Getenv in production; the
// error lists every place looked at.
func FindWeights(getenv func(string) string) (Source, error) {
	w, _ := hub.WeightsFor("rf-detr")
	loc, err := w.Locate(getenv, "")
	return Source{Dir: loc.Dir, Repo: loc.Repo, Revision: loc.Revision, Via: loc.Via}, err
}
