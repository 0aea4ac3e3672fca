// Command demo does the parts of `make demo` that need more than the CLI:
// it writes a random full-size RF-DETR-base checkpoint when the real weights
// cannot be downloaded (its detections are meaningless), draws a synthetic
// sample picture, and sends a picture to a server's POST /predict, printing
// the detections, or (pi0.5, `make demo-pi05`) as a robot's camera frame to
// POST /v1/actions/generations, printing the action chunk.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/ttmodel/tt-model/models/rfdetr"
)

func main() {
	checkpoint := flag.String("checkpoint", "", "write a random RF-DETR-base checkpoint (model.safetensors, config.json, the test-weights marker) into this folder")
	seed := flag.Uint64("seed", 1, "seed of the random checkpoint")
	picture := flag.String("image", "", "the sample picture: written as a 640x480 PNG when it does not exist")
	predict := flag.String("predict", "", "POST the picture to this server URL's /predict and print the detections")
	threshold := flag.Float64("threshold", 0.5, "detection threshold sent with --predict")
	actions := flag.String("actions", "", "send the picture as a camera frame to this pi0.5 server URL's /v1/actions/generations and print the action chunk")
	task := flag.String("task", "pick up the orange block", "the task sent with --actions")
	flag.Parse()
	if *actions != "" {
		err := run("", 0, *picture, "", 0)
		if err == nil {
			err = observe(os.Stdout, *actions, *picture, *task, 3)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*checkpoint, *seed, *picture, *predict, *threshold); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(checkpoint string, seed uint64, picture, url string, threshold float64) error {
	if checkpoint == "" && picture == "" {
		return fmt.Errorf("give --checkpoint DIR and/or --image FILE [--predict URL]")
	}
	if checkpoint != "" {
		if err := (rfdetr.RandomCheckpoint{Seed: seed}).Write(checkpoint); err != nil {
			return err
		}
	}
	if picture == "" {
		return nil
	}
	if _, err := os.Stat(picture); os.IsNotExist(err) {
		if err := writePicture(picture); err != nil {
			return err
		}
	}
	if url == "" {
		return nil
	}
	return postPicture(os.Stdout, url, picture, threshold)
}
