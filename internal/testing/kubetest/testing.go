package kubetest

import (
	"context"
	"os"
	"testing"

	"github.com/ttmodel/tt-model/internal/testing/kubebin"
	"github.com/ttmodel/tt-model/internal/testing/testenv"
)

// Run starts a control plane for t in a temporary folder and stops it when
// t ends. Without the binaries t skips, or fails where TT_REQUIRE names
// kube-apiserver.
func Run(t testing.TB) *Server {
	t.Helper()
	testenv.Require(t, kubebin.Requirement)
	bin, err := kubebin.Dir()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(context.Background(), bin, t.TempDir())
	if err != nil {
		t.Fatalf("start the test API server: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// SchedulerRequirement names kube-scheduler for TT_REQUIRE.
const SchedulerRequirement = "kube-scheduler"

// RunScheduler starts kube-scheduler against s for the rest of t (stopped
// with s). Without the binary t skips, or fails where TT_REQUIRE names
// kube-scheduler.
func RunScheduler(t testing.TB, s *Server) {
	t.Helper()
	dir, err := kubebin.Dir()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := kubebin.Scheduler(dir)
	if err != nil {
		testenv.Missing(t, SchedulerRequirement, err)
	}
	if err := s.StartScheduler(bin); err != nil {
		t.Fatalf("start kube-scheduler: %v", err)
	}
}

// RunNode starts a node for t in a short temporary folder and stops it,
// undoing its host changes, when t ends. Without what a node needs t skips,
// or fails where TT_REQUIRE names kube-node.
func RunNode(t testing.TB) *Node {
	t.Helper()
	testenv.Require(t, kubebin.NodeRequirement)
	dir, err := kubebin.Dir()
	if err != nil {
		t.Fatal(err)
	}
	bins, err := kubebin.Node(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: its path grows with the test's name, and containerd's
	// socket paths must fit in 108 bytes.
	state, err := os.MkdirTemp("", "ttk")
	if err != nil {
		t.Fatal(err)
	}
	n, err := StartNode(context.Background(), dir, state, bins)
	if err != nil {
		os.RemoveAll(state)
		t.Fatalf("start the test node: %v", err)
	}
	t.Cleanup(func() {
		n.Stop()
		if t.Failed() {
			t.Logf("the node's logs are kept in %s", state)
			return
		}
		os.RemoveAll(state)
	})
	return n
}
