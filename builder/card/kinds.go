package card

import (
	"fmt"
	"strings"

	"github.com/ttmodel/tt-model/builder/kind"
	"github.com/ttmodel/tt-model/manifest"
)

// kindCard is what a model card says that depends on the launcher kind: the
// server, how readiness shows, what to try once it runs, how a client talks
// to it and the Hub task when the author names none.
type kindCard struct {
	Server      string
	Ready       string
	Try         []string
	Endpoints   []endpoint
	UsingIt     string
	API         string // one catalog cell, when there is no endpoint table
	PipelineTag string
}

func cardOfKind(c *manifest.Container, weightsRepo string, port int) kindCard {
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	model, _ := c.Runtime["model"].(string)
	supervised := ", supervised by `tt-model supervise`"
	readyLine := func(kind string) string {
		l, _ := manifest.LaunchFor(kind, c.Runtime, weightsRepo, manifest.Profile{})
		return l.ReadyLine
	}
	switch c.Kind {
	case manifest.KindGoServer:
		return kindCard{
			Server:      fmt.Sprintf("tt-model-server (%s)%s", model, supervised),
			Ready:       "The server is ready when `GET /health` answers `\"status\": \"ok\"`.",
			Try:         []string{"curl -s " + url + "/health"},
			Endpoints:   goServerEndpoints(model),
			PipelineTag: goServerPipelineTags[model],
		}
	case "vllm-plugin", "vllm-fork":
		server := "vLLM (`vllm serve`) with the Tenstorrent platform plugin"
		if c.Kind == "vllm-fork" {
			server = "the tenstorrent/vllm fork, started by tt-metal's readiness runner"
		}
		return kindCard{
			Server: server + supervised,
			Ready:  fmt.Sprintf("The server is ready when its log shows `%s`.", readyLine(c.Kind)),
			Try:    []string{"curl -s " + url + "/v1/models"},
			UsingIt: fmt.Sprintf("The server speaks the OpenAI API at `%s/v1` (chat completions, completions, `/v1/models`). "+
				"Pass `\"model\": \"%s\"`: the weights id, not this package's name.", url, weightsRepo),
			API:         "OpenAI API (`/v1`)",
			PipelineTag: "text-generation",
		}
	}
	server := fmt.Sprintf("uvicorn serving `%v`", c.Runtime["app"])
	if c.Kind == "http-server" {
		argv, _ := kind.StringList(c.Runtime["command"], "")
		server = "the model's own server, `" + strings.Join(argv, " ") + "`"
	}
	return kindCard{
		Server:  server + supervised,
		Ready:   fmt.Sprintf("The server is ready when its log shows `%s`.", readyLine(c.Kind)),
		UsingIt: fmt.Sprintf("The server is the model's own (kind %s), not an OpenAI chat API: its routes and payloads are in `code/`.", c.Kind),
		API:     "the model's own (see `code/`)",
	}
}

// kindProvenanceRows name what the built block records beyond the tree and
// the weights: the base, how the image was built, vLLM and the plugin.
func kindProvenanceRows(built map[string]any) [][2]string {
	var rows [][2]string
	if b, ok := built["base"].(map[string]any); ok && stringField(b, "ref") != "" && stringField(b, "ref") != "scratch" {
		cell := fmt.Sprintf("`%s`", stringField(b, "ref"))
		if d := stringField(b, "digest"); d != "" {
			cell += fmt.Sprintf(" (`%s`)", d)
		}
		rows = append(rows, [2]string{"base image", cell})
	}
	if w := stringField(built, "built_with"); w != "" {
		rows = append(rows, [2]string{"built with", w})
	}
	for _, key := range []string{"vllm", "plugin"} {
		entry, ok := built[key].(map[string]any)
		if !ok {
			continue
		}
		name := map[string]string{"vllm": "vLLM", "plugin": "vllm-tt-plugin"}[key]
		switch {
		case stringField(entry, "wheel") != "":
			rows = append(rows, [2]string{name, fmt.Sprintf("`%s`, a wheel the author built", stringField(entry, "wheel"))})
		case stringField(entry, "repo") != "":
			rows = append(rows, [2]string{name, fmt.Sprintf("`%s` at `%s`", stringField(entry, "repo"), stringField(entry, "sha"))})
		case stringField(entry, "path") != "":
			cell := fmt.Sprintf("a local checkout at `%s`", stringField(entry, "sha"))
			if d, _ := entry["dirty"].(bool); d {
				cell += " *(dirty tree)*"
			}
			rows = append(rows, [2]string{name, cell})
		}
	}
	return rows
}
