package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"os"
)

// observe sends one robot observation (the picture as the camera frame, a
// task and a state) to a pi0.5 server's POST /v1/actions/generations
// (SGLang's action API) and prints the action chunk's shape and first rows.
func observe(w io.Writer, url, picture, task string, rows int) error {
	data, err := os.ReadFile(picture)
	if err != nil {
		return err
	}
	body := map[string]any{
		"input": map[string]any{
			"task": task,
			"observation": map[string]any{
				"images": map[string]any{"front": base64.StdEncoding.EncodeToString(data)},
				"state":  []float64{0.1, -0.2, 0.3, 0, 0.05, -0.1, 1},
			},
		},
		"parameters": map[string]any{"seed": 1},
	}
	var out struct {
		Data []struct {
			Action struct {
				Values     [][]float64 `json:"values"`
				Shape      []int       `json:"shape"`
				Normalized bool        `json:"normalized"`
			} `json:"action"`
			Steps int `json:"num_inference_steps"`
		} `json:"data"`
		Timings map[string]float64 `json:"timings"`
	}
	if err := postJSON(url, "/v1/actions/generations", body, &out); err != nil {
		return err
	}
	if len(out.Data) != 1 {
		return fmt.Errorf("the answer holds %d generations, want 1", len(out.Data))
	}
	a := out.Data[0].Action
	kind := "in the robot's units"
	if a.Normalized {
		kind = "normalized (no normalizer statistics beside the weights)"
	}
	fmt.Fprintf(w, "task %q: an action chunk of shape %v, %s, after %d denoising steps (total %.1f ms)\n",
		task, a.Shape, kind, out.Data[0].Steps, out.Timings["total_ms"])
	for r := 0; r < rows && r < len(a.Values); r++ {
		fmt.Fprintf(w, "  row %d:", r)
		for c := 0; c < 8 && c < len(a.Values[r]); c++ {
			fmt.Fprintf(w, " %+.3f", a.Values[r][c])
		}
		fmt.Fprintf(w, " … (%d values)\n", len(a.Values[r]))
	}
	return nil
}
