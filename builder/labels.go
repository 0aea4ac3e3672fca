package builder

import (
	"strings"

	"github.com/ttmodel/tt-model/manifest"
)

// imageLabels are the labels a registry answers without a pull.
func imageLabels(m *manifest.Manifest, code stagedCode, manifestJSON, created, revision string) map[string]string {
	names := make([]string, 0, len(m.Profiles()))
	for _, p := range m.Profiles() {
		names = append(names, p.Name)
	}
	weights := m.Weights.Repo
	if m.Weights.Revision != "" {
		weights += "@" + m.Weights.Revision
	}
	labels := map[string]string{
		"org.tenstorrent.tt-model":          m.Name,
		"org.tenstorrent.tt-model.kind":     m.Kind,
		"org.tenstorrent.tt-model.arch":     m.Arch,
		"org.tenstorrent.tt-model.repo":     m.Repo,
		"org.tenstorrent.tt-model.profiles": strings.Join(names, ","),
		"org.tenstorrent.tt-model.manifest": manifestJSON,
		"org.tenstorrent.tt-model.weights":  weights,
		"org.tenstorrent.tt-model.tt-metal": treePinLabel(m.Source.TTMetal, code.TTMetal),
		"org.opencontainers.image.title":    m.Name,
		"org.opencontainers.image.created":  created,
		"org.opencontainers.image.source":   "https://huggingface.co/" + m.Repo,
		"org.opencontainers.image.url":      "https://huggingface.co/" + m.Repo,
	}
	if m.Card != nil {
		if d := oneLine(m.Card.Description); d != "" {
			labels["org.opencontainers.image.description"] = d
		}
		if m.Card.License != nil && m.Card.License.ID != "" {
			labels["org.opencontainers.image.licenses"] = m.Card.License.ID
		}
	}
	if revision != "" {
		labels["org.opencontainers.image.revision"] = revision
	}
	return labels
}

// treePinLabel is where the tt-metal tree came from and at which commit.
func treePinLabel(src manifest.GitOrPath, pin treePin) string {
	where := src.Repo
	if !src.IsGit() {
		where = src.Path
		if pin.Remote != nil {
			where = *pin.Remote
		}
	}
	switch {
	case pin.SHA != nil:
		return where + "@" + *pin.SHA
	case src.IsGit():
		return src.String()
	}
	return where
}
