package builder

import (
	"context"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/internal/engine"
)

// dockerEngine is a reachable Docker engine.
type dockerEngine struct {
	c *client.Client
}

// connectDocker returns the engine named by DOCKER_HOST (or the default
// socket), or an error when none answers within a few seconds.
func connectDocker(ctx context.Context) (*dockerEngine, error) {
	c, err := engine.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &dockerEngine{c: c}, nil
}

func (d *dockerEngine) Close() error { return d.c.Close() }

// load streams img to the engine under tag.
func (d *dockerEngine) load(ctx context.Context, tag string, img v1.Image) error {
	return engine.Load(ctx, d.c, tag, img)
}

// run starts argv in a fresh container of image (no network, the image's
// user, its env with env on top), copies its output to out, and returns its
// exit code. The container is removed afterwards.
func (d *dockerEngine) run(ctx context.Context, image string, argv, env []string, out io.Writer) (int, error) {
	created, err := d.c.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:      image,
			Entrypoint: argv[:1],
			Cmd:        argv[1:],
			Env:        env,
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
