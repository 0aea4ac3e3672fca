// Package engine holds what the builder and the runner both need from a
// Docker engine: a client that is known to answer, and loading an image.
package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/moby/moby/client"
)

// Connect returns a client of the engine DOCKER_HOST names (or the default
// socket), or an error when none answers within a few seconds.
func Connect(ctx context.Context) (*client.Client, error) {
	c, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := c.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		c.Close()
		return nil, fmt.Errorf("docker engine not reachable: %w", err)
	}
	return c, nil
}

// Load streams img to the engine as a docker-save archive under tag: the
// form every engine version loads (OCI archives need Docker 25+). The engine
// answers 200 and reports failures inside its JSON stream; those are errors.
func Load(ctx context.Context, c *client.Client, tag string, img v1.Image) error {
	t, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("image tag %q: %w", tag, err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarball.Write(t, img, pw)) }()
	resp, err := c.ImageLoad(ctx, pr, client.ImageLoadWithQuiet(true))
	if err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("docker load %s: %w", tag, err)
	}
	defer resp.Close()
	dec := json.NewDecoder(bufio.NewReader(resp))
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("docker load %s: read the engine's answer: %w", tag, err)
		}
		if msg.ErrorDetail.Message != "" {
			return fmt.Errorf("docker load %s: %s", tag, msg.ErrorDetail.Message)
		}
		if msg.Error != "" {
			return fmt.Errorf("docker load %s: %s", tag, msg.Error)
		}
	}
}

// Save exports image ref from the engine (`docker save`) into a file under
// dir and opens it. A docker-save archive holds uncompressed layers; the
// image compresses them when its layers are read.
func Save(ctx context.Context, c *client.Client, ref, dir string) (v1.Image, error) {
	rc, err := c.ImageSave(ctx, []string{ref})
	if err != nil {
		return nil, fmt.Errorf("docker save %s: %w", ref, err)
	}
	defer rc.Close()
	f, err := os.CreateTemp(dir, "docker-save-*.tar")
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return nil, fmt.Errorf("docker save %s: %w", ref, err)
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	img, err := tarball.ImageFromPath(f.Name(), nil)
	if err != nil {
		return nil, fmt.Errorf("docker save %s: read the archive: %w", ref, err)
	}
	return img, nil
}
