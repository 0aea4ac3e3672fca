package card

import (
	"flag"
	"github.com/ttmodel/tt-model/internal/testing/textcheck"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/manifest"
)

var update = flag.Bool("update", false, "rewrite the card goldens under testdata/")

func readWires(t *testing.T, names ...string) []*manifest.Wire {
	t.Helper()
	var ws []*manifest.Wire
	for _, n := range names {
		w, err := manifest.ReadWire(filepath.Join("testdata", "wire", n+".json"))
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	return ws
}

func TestRenderCard(t *testing.T) {
	for _, tc := range []struct {
		wire     string
		warnings int
	}{{"demo", 2}, {"pi05", 0}} {
		t.Run(tc.wire, func(t *testing.T) {
			text, warnings, err := Render(readWires(t, tc.wire)[0])
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) != tc.warnings {
				t.Errorf("warnings %q, want %d", warnings, tc.warnings)
			}
			textcheck.Golden(t, filepath.Join("testdata", "card_"+tc.wire+".golden.md"), []byte(text), *update, "go test ./builder/card -run Card -update")
		})
	}
}

// TestRenderCardFixedOrder checks the section order on the fullest card,
// independently of the golden.
func TestRenderCardFixedOrder(t *testing.T) {
	text, _, err := Render(readWires(t, "pi05")[0])
	if err != nil {
		t.Fatal(err)
	}
	textcheck.InOrder(t, text, "---\nlicense: other\nlicense_name: gemma-terms-of-use\nlicense_link: https://ai.google.dev/gemma/terms\npipeline_tag: robotics\nbase_model:\n  - lerobot/pi05_base\n  - google/paligemma-3b-pt-224\ntags:\n",
		"---\n\n# pi05-demo", "Runs on **p300x2** (mesh `P300x2`)", "## At a glance", `SigLIP \| Gemma expert`,
		"## Intended use", "## Quickstart", "Send `POST /v1/actions/generations`.", "## Using it", "`/v1/actions/metadata`",
		"See the SGLang action API.", "## Expected performance", "## Limitations", "## Risks and safety considerations",
		"## Licensing", "## Related packages", "## Feedback", "## Provenance", "https://github.com/tenstorrent/tt-metal/commit/8b98410e730",
		"unpinned")
	if strings.Contains(text, "## Serve profiles") {
		t.Error("a one-profile card has a profile table")
	}
}

func TestRenderCatalog(t *testing.T) {
	text, warnings, err := RenderCatalog(readWires(t, "demo", "pi05"))
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 2 || !strings.HasPrefix(warnings[0], "demo: card.performance") {
		t.Errorf("warnings %q", warnings)
	}
	textcheck.InOrder(t, text, "# tt-model catalog", "| [demo](#demo) | p150, p300 | `one-chip` (default), `two-chip` |",
		"| [pi05-demo](#pi05-demo) | p300x2 | `default` (default) |", "| experimental |", "## demo", "### Quickstart", "## pi05-demo", "### Provenance")
	textcheck.Golden(t, filepath.Join("testdata", "catalog.golden.md"), []byte(text), *update, "go test ./builder/card -run Card -update")
}

// TestCatalogMixedKinds renders one catalog page over packages of four
// kinds: each says how its server starts, is ready and is called, and
// provenance names what its build recorded (base, build path, vLLM, plugin).
func TestCatalogMixedKinds(t *testing.T) {
	ws := readWires(t, "demo")
	built := func(extra map[string]any) map[string]any {
		b := map[string]any{"repo": "ttmodel/x", "tt_model_version": "0.0.0-test", "created_at": "2023-11-14T22:13:20Z",
			"base": map[string]any{"ref": "ghcr.io/acme/tt-metal-runtime:v1", "digest": "sha256:" + strings.Repeat("ab", 32)}}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	for _, tc := range []struct {
		file  string
		built map[string]any
	}{
		{"kinds/echo/tt-model.yaml", built(map[string]any{"built_with": "daemonless (go-containerregistry)"})},
		{"kinds/dit/tt-model.yaml", built(map[string]any{"built_with": "daemonless (go-containerregistry)"})},
		{"kinds/upstream/muse-glimmer-30b.yaml", built(map[string]any{"built_with": "Docker engine build API (BuildKit)",
			"plugin": map[string]any{"repo": "https://github.com/housTT/vllm-tt-plugin", "sha": "106744c01de96825ed8c81226f4fa043e8e929f4"}})},
	} {
		m, err := manifest.Load(filepath.Join("..", "testdata", tc.file), manifest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, m.ToWire(manifest.WireInfo{ImageTag: "tt-model/" + m.Name + ":0123456789ab", Digest: "sha256:" + strings.Repeat("01", 32),
			ToolVersion: "0.0.0-test", CreatedAt: "2023-11-14T22:13:20Z", Built: tc.built}))
	}
	text, _, err := RenderCatalog(ws)
	if err != nil {
		t.Fatal(err)
	}
	textcheck.Golden(t, filepath.Join("testdata", "catalog_kinds.golden.md"), []byte(text), *update, "go test ./builder/card -run Card -update")
	for _, want := range []string{
		"The server is ready when its log shows `\"event\": \"ready\"`.",
		"uvicorn serving `models.dit_demo.app:app`",
		"The server speaks the OpenAI API at `http://127.0.0.1:20000/v1`",
		"| vllm-tt-plugin | `https://github.com/housTT/vllm-tt-plugin` at `106744c01de96825ed8c81226f4fa043e8e929f4` |",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("catalog lacks %q", want)
		}
	}
	// A vLLM package's card defaults its Hub task, as upstream's launcher does.
	card, _, err := Render(ws[len(ws)-1])
	if err != nil || !strings.Contains(card, "pipeline_tag: text-generation") {
		t.Errorf("the vllm-plugin card has no default pipeline tag (%v):\n%s", err, card)
	}
}
