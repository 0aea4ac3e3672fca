// Command kubeserver runs the test Kubernetes of internal/testing/kubetest
// until interrupted and prints the KUBECONFIG that reaches it: the control
// plane alone (etcd and kube-apiserver: objects are stored, no pod starts),
// or with --node a single-node cluster that runs pods (controller manager,
// scheduler, a containerd of its own, a kubelet, and a registry to push
// images to), whose host changes are undone when it stops.
// scripts/kube-apiserver.sh serve builds the binaries and runs this.
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
	node := flag.Bool("node", false, "run a node too (kubelet, containerd, controllers, a registry): pods start; needs root")
	flag.Parse()
	if err := run(*dir, *node); err != nil {
		fmt.Fprintln(os.Stderr, "kubeserver:", err)
		os.Exit(1)
	}
}

func run(dir string, node bool) error {
	bin, err := kubebin.Dir()
	if err != nil {
		return err
	}
	var bins kubebin.NodeBinaries
	if node {
		if bins, err = kubebin.Node(bin); err != nil {
			return err
		}
	}
	if dir == "" {
		// Short: containerd's socket paths under it must fit in 108 bytes.
		if dir, err = os.MkdirTemp("", "ttk"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if node {
		fmt.Fprintf(os.Stderr, "starting a node: etcd %s, Kubernetes %s with containerd and a kubelet (state in %s)\n", kubebin.EtcdVersion, kubebin.KubeVersion, dir)
		n, err := kubetest.StartNode(ctx, bin, dir, bins)
		if err != nil {
			return err
		}
		defer n.Stop()
		fmt.Printf("node %s is Ready; the API server is at %s.\n", kubetest.NodeName, n.URL)
		fmt.Printf("export KUBECONFIG=%s\n", n.Kubeconfig)
		fmt.Printf("registry: %s (tt-model push PACKAGE --registry %s/NS --insecure --no-hub; k8s apply … --registry %s/NS --chips none --no-hugepages)\n", n.Registry, n.Registry, n.Registry)
		fmt.Printf("pods reach this host at %s (a Hub or weights mirror listening there: --hf-endpoint http://%s:PORT)\n", kubetest.BridgeIP, kubetest.BridgeIP)
	} else {
		fmt.Fprintf(os.Stderr, "starting etcd %s and kube-apiserver %s (state in %s)\n", kubebin.EtcdVersion, kubebin.KubeVersion, dir)
		s, err := kubetest.Start(ctx, bin, dir)
		if err != nil {
			return err
		}
		defer s.Stop()
		fmt.Printf("kube-apiserver %s is ready at %s; no kubelet runs, so pods are stored but never started.\n", kubebin.KubeVersion, s.URL)
		fmt.Printf("export KUBECONFIG=%s\n", s.Kubeconfig)
	}
	fmt.Println("Ctrl-C stops it.")
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "stopping")
	return nil
}
