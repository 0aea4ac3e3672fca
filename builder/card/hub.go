package card

import (
	"fmt"
	"slices"

	"github.com/ttmodel/tt-model/manifest"
)

// CatalogTag is the Hub tag `push --publish` adds: the model is listed in the
// tt-model catalog.
const CatalogTag = "tt-model-catalog"

// RenderHub renders the card a package gets in Hub repo repo: its
// quickstart serves the package by that name (`tt-model serve org/name`)
// instead of from a local build/ folder, and with publish the front matter
// carries the catalog tag.
func RenderHub(w *manifest.Wire, repo string, publish bool) (string, []string, error) {
	cm, fm, err := cardFor(w)
	if err != nil {
		return "", nil, err
	}
	cm.Repo = repo
	cm.Quickstart = []string{
		fmt.Sprintf("tt-model serve %s   # pulls the package and its pinned weights, serves the default profile, prints its url", repo),
		fmt.Sprintf("tt-model curl %s    # asks /v1/models, then sends the model's sample request", w.Name),
		fmt.Sprintf("tt-model stop %s", w.Name),
	}
	if publish && !slices.Contains(fm.Tags, CatalogTag) {
		fm.Tags = append(fm.Tags, CatalogTag)
		slices.Sort(fm.Tags)
	}
	return render(w, cm, fm)
}
