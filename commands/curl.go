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
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/runner"
	"github.com/ttmodel/tt-model/server/api"
)

func newCurlCmd() *cobra.Command {
	var sel selector
	var opts curlOptions
	cmd := &cobra.Command{
		Use:   "curl NAME",
		Short: "Ask a running server /v1/models, then send it the model's sample request",
		Long: "curl finds the running server of package NAME (see `tt-model ps`), asks GET /v1/models for the served\n" +
			"model id, then POSTs the model's sample request to /predict: a generated picture for an object\n" +
			"detector (RF-DETR), an observation (one generated camera image, a zero state of the server's\n" +
			"state_dim, a prompt) for a policy (pi0.5), and prints a short summary of both answers (the model id;\n" +
			"the top detections, or the action chunk's shape), after a warning when the server says it runs\n" +
			"generated test weights; --json prints the answers themselves. --print writes the sample body to a\n" +
			"file and prints the curl commands instead. A server that requires an API key gets it from\n" +
			"--api-key-file (else TT_API_KEY_FILE, else TT_API_KEY) as Authorization: Bearer.",
		Example: "  tt-model curl rf-detr\n  tt-model curl rf-detr --json\n  tt-model curl rf-detr --print\n" +
			"  tt-model curl pi05 --api-key-file ~/.config/tt-model/api-key",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withInstance(cmd, args[0], sel, func(_ runner.Runner, inst *runner.Instance) error {
				return curlInstance(cmd, inst, opts)
			})
		},
	}
	sel.bind(cmd)
	cmd.Flags().BoolVar(&opts.print, "print", false, "print the curl commands (the body written to a file) instead of sending")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the server's answers as they came, not a summary")
	cmd.Flags().StringVar(&opts.apiKeyFile, "api-key-file", "", "file holding the server's API key (default: TT_API_KEY_FILE, else TT_API_KEY)")
	return cmd
}

// curlOptions are curl's flags.
type curlOptions struct {
	print, json bool
	apiKeyFile  string
}

// keyTransport sends the server's API key with every request.
type keyTransport struct{ key string }

func (t keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.key)
	return http.DefaultTransport.RoundTrip(r)
}

// curlAuth is the -H argument that sends the key in a printed curl command:
// the key read where it is when the command runs, never the key itself.
func curlAuth(file string, getenv func(string) string) string {
	switch {
	case file != "":
		return ` -H "Authorization: Bearer $(cat ` + file + `)"`
	case getenv(api.APIKeyFileEnv) != "":
		return ` -H "Authorization: Bearer $(cat \"$` + api.APIKeyFileEnv + `\")"`
	case getenv(api.APIKeyEnv) != "":
		return ` -H "Authorization: Bearer $` + api.APIKeyEnv + `"`
	}
	return ""
}

// curlInstance asks inst /v1/models, then sends it the model's sample
// request (or, with printOnly, prints the curl commands).
func curlInstance(cmd *cobra.Command, inst *runner.Instance, opts curlOptions) error {
	if !inst.Running {
		return exitf(1, "%s is %s, not running (see `tt-model logs %s`)", inst.Name, inst.State, inst.Package)
	}
	base := inst.URL() // serve --bind's address, else loopback
	hc := &http.Client{Timeout: 5 * time.Minute}
	key, _, err := api.LoadAPIKey(opts.apiKeyFile, os.Getenv)
	if err != nil {
		return exitf(exitUsage, "%v", err)
	}
	if key != "" {
		hc.Transport = keyTransport{key: key}
	}
	auth := curlAuth(opts.apiKeyFile, os.Getenv)
	body, err := sampleRequest(hc, base)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	out := cmd.OutOrStdout()
	if opts.print {
		file, err := writePrivateTemp("tt-model-curl-"+inst.Package+"-*.json", body)
		if err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		fmt.Fprintf(out, "curl -s%s %s/v1/models\n", auth, base)
		fmt.Fprintf(out, "curl -s%s %s/predict -H 'Content-Type: application/json' -d @%s\n", auth, base, file)
		return nil
	}
	if n := serverTestWeights(hc, base); n != "" {
		fmt.Fprintf(out, "WARNING: this server runs %s\n", n)
	}
	models, err := fetch(hc, http.MethodGet, base+"/v1/models", nil)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	answer, err := fetch(hc, http.MethodPost, base+"/predict", body)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	if opts.json {
		fmt.Fprintf(out, "GET %s/v1/models\n%s\n", base, models)
		fmt.Fprintf(out, "POST %s/predict (the sample request)\n%s\n", base, answer)
		return nil
	}
	fmt.Fprintf(out, "GET %s/v1/models: %s\n", base, summarizeModels(models))
	fmt.Fprintf(out, "POST %s/predict (the sample request): %s\n", base, summarizePredict(answer))
	return nil
}

// summarizeModels names the served model ids of a /v1/models answer.
func summarizeModels(raw []byte) string {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &list); err != nil || len(list.Data) == 0 {
		return string(bytes.TrimSpace(raw))
	}
	ids := make([]string, len(list.Data))
	for i, m := range list.Data {
		ids[i] = m.ID
	}
	return "model " + strings.Join(ids, ", ")
}

// Detections the sample request asks for (the most /predict returns, so the
// count is the number above the threshold) and the summary lists.
const (
	askDetections = 300
	topDetections = 5
)

// summarizePredict says in a few lines what a /predict answer holds: a
// detector's count above its threshold and its top detections, or a
// policy's action chunk shape and first action. An answer of neither shape
// is printed as it came.
func summarizePredict(raw []byte) string {
	var a struct {
		Detections []struct {
			Label string     `json:"label"`
			Score float64    `json:"score"`
			Box   [4]float64 `json:"box"`
		} `json:"detections"`
		NumDetections *int        `json:"num_detections"`
		Threshold     float64     `json:"threshold"`
		Actions       [][]float64 `json:"actions"`
		ActionHorizon int         `json:"action_horizon"`
		ActionDim     int         `json:"action_dim"`
		Steps         int         `json:"denoising_steps"`
		Timing        struct {
			Total float64 `json:"total"`
		} `json:"timing_ms"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return "\n" + string(bytes.TrimSpace(raw))
	}
	var b strings.Builder
	switch {
	case a.NumDetections != nil:
		count := fmt.Sprint(*a.NumDetections)
		if *a.NumDetections >= askDetections {
			count = fmt.Sprintf("%d or more", askDetections)
		}
		fmt.Fprintf(&b, "%s detections above threshold %g (%.0f ms)", count, a.Threshold, a.Timing.Total)
		for i, d := range a.Detections {
			if i == topDetections {
				fmt.Fprintf(&b, "\n  … %d more (--json shows all)", len(a.Detections)-topDetections)
				break
			}
			fmt.Fprintf(&b, "\n  %-14s %.3f  box [%.0f %.0f %.0f %.0f]", d.Label, d.Score, d.Box[0], d.Box[1], d.Box[2], d.Box[3])
		}
	case a.Actions != nil:
		fmt.Fprintf(&b, "action chunk %dx%d (horizon x action dim), %d denoising steps", a.ActionHorizon, a.ActionDim, a.Steps)
		if len(a.Actions) > 0 {
			first := a.Actions[0]
			shown := first[:min(len(first), 4)]
			more := ""
			if len(first) > len(shown) {
				more = " …"
			}
			fmt.Fprintf(&b, "\n  first action %.4f%s", shown, more)
		}
	default:
		return "\n" + string(bytes.TrimSpace(raw))
	}
	return b.String()
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
		return json.Marshal(map[string]any{"image": picture, "max_detections": askDetections})
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
