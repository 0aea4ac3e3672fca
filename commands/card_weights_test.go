package commands

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/runner"
	"github.com/ttmodel/tt-model/runner/runnertest"
)

// TestReadyCardNamesTestWeightsAndSendsFiles: the ready card of a server on generated test weights
// says so, and its RF-DETR try lines send the picture from its file (never a base64 argument).
func TestReadyCardNamesTestWeightsAndSendsFiles(t *testing.T) {
	const repo, commit = hub.RFDETRRepo, "7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a"
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "model.safetensors"), []byte("random"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := hub.WriteTestWeightsMarker(src, "a unit test"); err != nil {
		t.Fatal(err)
	}
	cache := hub.Cache{Dir: t.TempDir()}
	snap, err := cache.Import(repo, commit, src)
	if err != nil {
		t.Fatal(err)
	}
	pkg := &runner.Package{Wire: &manifest.Wire{Name: "rf-detr", Container: &manifest.Container{
		Kind: manifest.KindGoServer, Runtime: map[string]any{"model": "rf-detr"}}}}
	inst := &runner.Instance{Name: "tt-model-rf-detr-default", Package: "rf-detr", Profile: "default", Runner: "docker", Port: 20000}
	for _, tc := range []struct {
		name string
		spec runner.Spec
		test bool
	}{
		{"pulled test weights", runner.Spec{Weights: []*hub.Snapshot{snap}}, true},
		{"--no-weights, HF_MODEL on the test snapshot", runner.Spec{WeightsDir: snap.Dir}, true},
		{"real weights", runner.Spec{Weights: []*hub.Snapshot{{Repo: repo, Commit: commit, Dir: src + "-none"}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			spec.Package, spec.Profile = pkg, manifest.Profile{Name: "default"}
			var b bytes.Buffer
			printCard(&b, &spec, inst, true)
			card := b.String()
			warn := "WARNING  random test weights, not " + repo + " (a unit test): the outputs are meaningless"
			if strings.Contains(card, warn) != tc.test {
				t.Errorf("card (test weights %v):\n%s", tc.test, card)
			}
			for _, want := range []string{"/predict -F image=@photo.jpg", "--data-binary @photo.jpg"} {
				if !strings.Contains(card, want) {
					t.Errorf("card lacks %q:\n%s", want, card)
				}
			}
			if strings.Contains(card, "base64") {
				t.Errorf("card still passes the picture as a base64 argument:\n%s", card)
			}
		})
	}
}

// TestCurlNamesTestWeights: `tt-model curl` says first that the server runs generated test
// weights when its /health says so, and nothing of the kind when it does not.
func TestCurlNamesTestWeights(t *testing.T) {
	for _, notice := range []string{"random test weights, not org/x (a test): the outputs are meaningless", ""} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/health":
				json.NewEncoder(w).Encode(map[string]any{"status": "ok", "weights": notice})
			case "/info":
				io.WriteString(w, `{"task": "object-detection"}`)
			default:
				io.WriteString(w, `{}`)
			}
		}))
		port, _ := strconv.Atoi(srv.URL[strings.LastIndex(srv.URL, ":")+1:])
		cmd := &cobra.Command{}
		var out bytes.Buffer
		cmd.SetOut(&out)
		err := curlInstance(cmd, &runner.Instance{Name: "x", Package: "x", Running: true, Port: port}, curlOptions{})
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.HasPrefix(out.String(), "WARNING: this server runs "+notice+"\n"); got != (notice != "") || (notice == "" && strings.Contains(out.String(), "WARNING")) {
			t.Errorf("notice %q: output\n%s", notice, out.String())
		}
	}
}

// TestInfoNamesCachedTestWeights: `info` of a package whose pinned weights are generated test
// weights in the cache says so, in text and JSON.
func TestInfoNamesCachedTestWeights(t *testing.T) {
	hubEnv(t)
	commit := strings.Repeat("a", 40)
	server := filepath.Join(t.TempDir(), "server") // never run: any file stands in
	if err := os.WriteFile(server, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, _ := runnertest.StagedPackage(t, "infotest", server, commit)
	src := t.TempDir()
	for name, data := range map[string]string{"model.safetensors": "random", "config.json": "{}"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := hub.WriteTestWeightsMarker(src, "a unit test"); err != nil {
		t.Fatal(err)
	}
	if _, err := (hub.Cache{Dir: filepath.Join(os.Getenv("HF_HOME"), "hub")}).Import(runnertest.WeightsRepo, commit, src); err != nil {
		t.Fatal(err)
	}
	want := "random test weights, not " + runnertest.WeightsRepo + " (a unit test)"
	if code, out, errOut := runCLI("info", dir); code != 0 || !strings.Contains(out, "WARNING  "+want) {
		t.Errorf("info: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runCLI("info", dir, "--json")
	var info struct {
		TestWeights map[string]string `json:"test_weights"`
	}
	if err := json.Unmarshal([]byte(out), &info); code != 0 || err != nil || !strings.HasPrefix(info.TestWeights[runnertest.WeightsRepo], want) {
		t.Errorf("info --json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
}
