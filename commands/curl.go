package commands

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/runner"
)

// Deliberate twin of newK8sRenderCmd in commands/k8s.go: every command's constructor is one
// cobra.Command literal (Use, Short, Long, Example, Args, RunE) of the same shape; what fills it is
// this command's own.
func newCurlCmd() *cobra.Command {
	var sel selector
	var printOnly bool
	cmd := &cobra.Command{
		Use:   "curl NAME",
		Short: "Ask a running server /v1/models, then send it the model's sample request",
		Long: "curl finds the running server of package NAME (see `tt-model ps`), asks GET /v1/models for the served\n" +
			"model id, then POSTs the model's sample request to /predict: a generated picture for an object\n" +
			"detector (RF-DETR), an observation (one generated camera image, a zero state of the server's\n" +
			"state_dim, a prompt) for a policy (pi0.5), and prints both answers, after a warning when the server\n" +
			"says it runs generated test weights. --print writes the sample body to a file and prints the curl\n" +
			"commands instead.",
		Example: "  tt-model curl rf-detr\n  tt-model curl rf-detr --print",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withInstance(cmd, args[0], sel, func(_ runner.Runner, inst *runner.Instance) error {
				return curlInstance(cmd, inst, printOnly)
			})
		},
	}
	sel.bind(cmd)
	cmd.Flags().BoolVar(&printOnly, "print", false, "print the curl commands (the body written to a file) instead of sending")
	return cmd
}

// curlInstance asks inst /v1/models, then sends it the model's sample
// request (or, with printOnly, prints the curl commands).
func curlInstance(cmd *cobra.Command, inst *runner.Instance, printOnly bool) error {
	if !inst.Running {
		return exitf(1, "%s is %s, not running (see `tt-model logs %s`)", inst.Name, inst.State, inst.Package)
	}
	base := inst.URL() // serve --bind's address, else loopback
	hc := &http.Client{Timeout: 5 * time.Minute}
	body, err := sampleRequest(hc, base)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	out := cmd.OutOrStdout()
	if printOnly {
		file, err := writePrivateTemp("tt-model-curl-"+inst.Package+"-*.json", body)
		if err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		fmt.Fprintf(out, "curl -s %s/v1/models\n", base)
		fmt.Fprintf(out, "curl -s %s/predict -H 'Content-Type: application/json' -d @%s\n", base, file)
		return nil
	}
	if n := serverTestWeights(hc, base); n != "" {
		fmt.Fprintf(out, "WARNING: this server runs %s\n", n)
	}
	models, err := fetch(hc, http.MethodGet, base+"/v1/models", nil)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	fmt.Fprintf(out, "GET %s/v1/models\n%s\n", base, models)
	answer, err := fetch(hc, http.MethodPost, base+"/predict", body)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	fmt.Fprintf(out, "POST %s/predict (the sample request)\n%s\n", base, answer)
	return nil
}

// sampleRequest builds the /predict body the model behind base expects,
// telling the models apart by /info's task.
func sampleRequest(hc *http.Client, base string) ([]byte, error) {
	raw, err := fetch(hc, http.MethodGet, base+"/info", nil)
	if err != nil {
		return nil, err
	}
	var info struct {
		Task string `json:"task"`
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		return nil, fmt.Errorf("GET %s/info: %w", base, err)
	}
	picture, err := samplePicture(224)
	if err != nil {
		return nil, err
	}
	if info.Task == "object-detection" {
		return json.Marshal(map[string]any{"image": picture})
	}
	raw, err = fetch(hc, http.MethodGet, base+"/v1/actions/metadata", nil)
	if err != nil {
		return nil, fmt.Errorf("the server is neither a detector nor a policy with /v1/actions/metadata: %w", err)
	}
	var meta struct {
		StateDim int `json:"state_dim"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, fmt.Errorf("GET %s/v1/actions/metadata: %w", base, err)
	}
	return json.Marshal(map[string]any{"images": []string{picture}, "prompt": "pick up the cup",
		"state": make([]float64, meta.StateDim), "seed": 0})
}

// samplePicture is a base64 PNG: a gradient with a bright square, so a
// detector has edges to look at.
func samplePicture(side int) (string, error) {
	img := image.NewRGBA(image.Rect(0, 0, side, side))
	for y := 0; y < side; y++ {
		for x := 0; x < side; x++ {
			c := color.RGBA{uint8(x * 255 / side), uint8(y * 255 / side), 128, 255}
			if x > side/3 && x < 2*side/3 && y > side/3 && y < 2*side/3 {
				c = color.RGBA{240, 240, 240, 255}
			}
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// fetch sends one request and returns the body, or an error naming the URL
// and status.
func fetch(hc *http.Client, method, url string, body []byte) ([]byte, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: HTTP %d: %s", method, url, resp.StatusCode, bytes.TrimSpace(b))
	}
	return b, nil
}

// serverTestWeights is the notice of generated test weights the server's /health carries, "" when
// it has none (or does not answer: the requests after say why).
func serverTestWeights(hc *http.Client, base string) string {
	raw, err := fetch(hc, http.MethodGet, base+"/health", nil)
	if err != nil {
		return ""
	}
	var h struct {
		Weights string `json:"weights"`
	}
	_ = json.Unmarshal(raw, &h)
	return h.Weights
}

// writePrivateTemp writes data to a new file in the temp folder, created
// with O_EXCL, mode 0600 and a random name: a fixed /tmp name could be a
// link another user planted, or be read by them.
func writePrivateTemp(pattern string, data []byte) (string, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return "", fmt.Errorf("sample body file: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", fmt.Errorf("write %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}
