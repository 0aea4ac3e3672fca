// Command kubeserver runs the test control plane of internal/testing/kubetest (etcd
// and kube-apiserver, no kubelet) until interrupted and prints the
// KUBECONFIG that reaches it. scripts/kube-apiserver.sh serve builds the
// binaries and runs this.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ttmodel/tt-model/internal/testing/kubebin"
	"github.com/ttmodel/tt-model/internal/testing/kubetest"
)

func main() {
	dir := flag.String("dir", "", "state folder (default: a new temporary folder, removed at exit)")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "kubeserver:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	bin, err := kubebin.Dir()
	if err != nil {
		return err
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "tt-model-kubeserver-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "starting etcd %s and kube-apiserver %s (state in %s)\n", kubebin.EtcdVersion, kubebin.KubeVersion, dir)
	s, err := kubetest.Start(ctx, bin, dir)
	if err != nil {
		return err
	}
	defer s.Stop()
	fmt.Printf("kube-apiserver %s is ready at %s; no kubelet runs, so pods are stored but never started.\n", kubebin.KubeVersion, s.URL)
	fmt.Printf("export KUBECONFIG=%s\n", s.Kubeconfig)
	fmt.Println("Ctrl-C stops it.")
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "stopping")
	return nil
}
