package builder

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// dockerEngine is a reachable Docker engine.
type dockerEngine struct {
	c *client.Client
}

// connectDocker returns the engine named by DOCKER_HOST (or the default
// socket), or an error when none answers within a few seconds.
func connectDocker(ctx context.Context) (*dockerEngine, error) {
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
	return &dockerEngine{c: c}, nil
}

func (d *dockerEngine) Close() error { return d.c.Close() }

// load streams img to the engine in docker-save form (the only form every
// engine version loads) under tag, and fails on an error the engine reports
// inside its 200 response.
func (d *dockerEngine) load(ctx context.Context, tag string, img v1.Image) error {
	t, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("tag %s: %w", tag, err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarball.Write(t, img, pw)) }()
	resp, err := d.c.ImageLoad(ctx, pr, client.ImageLoadWithQuiet(true))
	if err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("docker load %s: %w", tag, err)
	}
	defer resp.Close()
	dec := json.NewDecoder(bufio.NewReader(resp))
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("docker load %s: read response: %w", tag, err)
		}
		if msg.Error != "" {
			return fmt.Errorf("docker load %s: %s", tag, msg.Error)
		}
	}
}

// run starts argv in a fresh container of image (no network, the image's
// user and env), copies its output to out, and returns its exit code. The
// container is removed afterwards.
func (d *dockerEngine) run(ctx context.Context, image string, argv []string, out io.Writer) (int, error) {
	created, err := d.c.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:      image,
			Entrypoint: argv[:1],
			Cmd:        argv[1:],
		},
		HostConfig: &container.HostConfig{NetworkMode: network.NetworkNone},
	})
	if err != nil {
		return -1, fmt.Errorf("create container of %s: %w", image, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = d.c.ContainerRemove(rctx, created.ID, client.ContainerRemoveOptions{Force: true})
	}()
	wait := d.c.ContainerWait(ctx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := d.c.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return -1, fmt.Errorf("start %v in %s: %w", argv, image, err)
	}
	var code int
	select {
	case r := <-wait.Result:
		if r.Error != nil && r.Error.Message != "" {
			return -1, fmt.Errorf("wait for %v: %s", argv, r.Error.Message)
		}
		code = int(r.StatusCode)
	case err := <-wait.Error:
		return -1, fmt.Errorf("wait for %v: %w", argv, err)
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	logs, err := d.c.ContainerLogs(ctx, created.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return code, fmt.Errorf("logs of %v: %w", argv, err)
	}
	defer logs.Close()
	if _, err := stdcopy.StdCopy(out, out, logs); err != nil {
		return code, fmt.Errorf("logs of %v: %w", argv, err)
	}
	return code, nil
}
