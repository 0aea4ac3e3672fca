package commands

import (
	"strings"
	"testing"

	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/runner"
)

// The ready card says in one line who can connect: on loopback (serve's
// default) how to let robots on the network in; on every interface that
// they can, and without a key that anyone can; with a key how to send it.
func TestReadyCardExposure(t *testing.T) {
	pkg := &runner.Package{Wire: &manifest.Wire{Name: "rf-detr", Container: &manifest.Container{Kind: manifest.KindGoServer, Runtime: map[string]any{"model": "rf-detr"}}}}
	for _, c := range []struct {
		bind, keyFile string
		want, not     []string
	}{
		{"127.0.0.1", "", []string{"exposed  port 20000 on 127.0.0.1 only; to let robots on the network connect, serve with --bind 0.0.0.0 --api-key-file KEYFILE"}, []string{"auth "}},
		{"0.0.0.0", "", []string{"on every interface of this host: robots on the network can connect, and so can anyone: --api-key-file requires a key"}, nil},
		{"", "/k/key", []string{"robots on the network can connect\n", `auth     every route but /health needs the key: curl -H "Authorization: Bearer $(cat /k/key)"`, "tt-model curl --api-key-file /k/key"}, []string{"so can anyone"}},
	} {
		spec := &runner.Spec{Package: pkg, Profile: manifest.Profile{Name: "default"}, APIKeyFile: c.keyFile}
		inst := &runner.Instance{Name: "tt-model-rf-detr-default", Package: "rf-detr", Profile: "default", Runner: "docker", Port: 20000, Bind: c.bind}
		var out strings.Builder
		printCard(&out, spec, inst, true)
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("bind %q key %q: card lacks %q:\n%s", c.bind, c.keyFile, w, out.String())
			}
		}
		for _, n := range c.not {
			if strings.Contains(out.String(), n) {
				t.Errorf("bind %q key %q: card has %q:\n%s", c.bind, c.keyFile, n, out.String())
			}
		}
	}
}

// serve publishes on loopback unless --bind says otherwise.
func TestServeBindsLoopbackByDefault(t *testing.T) {
	f := newServeCmd().Flags().Lookup("bind")
	if f == nil || f.DefValue != "127.0.0.1" {
		t.Fatalf("serve --bind default %v, want 127.0.0.1", f)
	}
}
