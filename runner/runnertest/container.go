package runnertest

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// RunContainer creates and starts a container on the engine and returns
// its id and its IP address on the engine's network, where the test
// reaches its ports without publishing them. It is removed when the test
// ends.
func RunContainer(t testing.TB, c *client.Client, opts client.ContainerCreateOptions) (id, ip string) {
	t.Helper()
	ctx := context.Background()
	created, err := c.ContainerCreate(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true}) //nolint:errcheck // best effort
	})
	if _, err := c.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	info, err := c.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range info.Container.NetworkSettings.Networks {
		if n.IPAddress.IsValid() {
			return created.ID, n.IPAddress.String()
		}
	}
	t.Fatalf("container %s has no IP address", created.ID)
	return "", ""
}

// ServerEnv asks the stand-in server (BuildHealthServer) at url for its
// environment (GET /env), waiting up to 30 s for it to listen; output, when
// the wait fails, says what the server and its supervisor printed.
func ServerEnv(t testing.TB, url string, output func() string) map[string]string {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := c.Get(url + "/env")
		if err == nil {
			defer resp.Body.Close()
			var env map[string]string
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s/env: HTTP %d", url, resp.StatusCode)
			}
			if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
				t.Fatalf("GET %s/env: %v", url, err)
			}
			return env
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s/env: %v\n%s", url, err, output())
		}
	}
}
