// Package kubetest runs real Kubernetes for tests and for trying `tt-model
// k8s` by hand, built from the Go modules by scripts/kube-apiserver.sh, with
// all state in one folder. Two sizes: a control plane (etcd and
// kube-apiserver on free loopback ports, on request kube-scheduler), where
// objects are validated, admitted, defaulted and stored and no pod starts;
// and a node (node.go): the control plane plus the controller manager, a
// containerd of its own, a kubelet and a registry, where pods run.
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// readyTimeout bounds the control plane's start (about 15 s on 2 idle cores).
const readyTimeout = 3 * time.Minute

// Server is a running etcd + kube-apiserver.
type Server struct {
	URL        string // https://127.0.0.1:PORT
	Kubeconfig string // a kubeconfig for it (token user in system:masters)
	Dir        string // state, certificates and the two logs

	procGroup
}

// Start runs etcd and kube-apiserver from binDir with their state under dir
// and returns once /readyz says ok. Their output goes to dir/etcd.log and
// dir/kube-apiserver.log.
func Start(ctx context.Context, binDir, dir string) (s *Server, err error) {
	s = &Server{Dir: dir, procGroup: procGroup{dir: dir}}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	if err := s.spawn(filepath.Join(binDir, "etcd"), "etcd",
		"--name", "default", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL,
		"--unsafe-no-fsync", "--log-level", "warn"); err != nil {
		return nil, err
	}
	token, err := writeCredentials(dir)
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(dir, "certs")
	s.URL = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	if err := s.spawn(filepath.Join(binDir, "kube-apiserver"), "kube-apiserver",
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(ports[2]),
		"--cert-dir", certDir,
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
		"--authorization-mode", "AlwaysAllow",
		// A test node registers under a name no resolver knows: reach its
		// kubelet (logs, exec, port-forward) by its address.
		"--kubelet-preferred-address-types", "InternalIP",
		"--token-auth-file", filepath.Join(dir, "tokens.csv")); err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx, certDir, token); err != nil {
		return nil, err
	}
	s.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(s.Kubeconfig, s.URL, filepath.Join(certDir, "apiserver.crt"), token); err != nil {
		return nil, err
	}
	return s, nil
}

// waitReady polls /readyz until it answers ok, a process exits, or the
// timeout ends; the error carries the end of the logs.
func (s *Server) waitReady(ctx context.Context, certDir, token string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	// The API server writes its self-signed certificate at start; until
	// then the probe cannot verify it, so the first probes skip
	// verification and only /readyz's answer counts. The kubeconfig
	// verifies against the certificate.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback, own server, see above
	}}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	last := errors.New("no answer yet")
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if resp, err := client.Do(req); err != nil {
			last = err
		} else {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Equal(bytes.TrimSpace(body), []byte("ok")) {
				if _, err := os.Stat(filepath.Join(certDir, "apiserver.crt")); err == nil {
					return nil
				}
			}
			last = fmt.Errorf("/readyz: HTTP %d %s", resp.StatusCode, bytes.TrimSpace(body))
		}
		if err := s.exited(); err != nil {
			return fmt.Errorf("%w before the API server was ready\n%s", err, s.logTails())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready after %s: %v\n%s", readyTimeout, last, s.logTails())
		case <-tick.C:
		}
	}
}

// StartScheduler runs kube-scheduler (bin) against the API server, its
// output in dir/kube-scheduler.log, stopped by Stop before the API server.
// It binds pods to Node objects and allocates their resource claims from
// the ResourceSlices it finds; no kubelet starts them.
func (s *Server) StartScheduler(bin string) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	return s.spawn(bin, "kube-scheduler",
		"--kubeconfig", s.Kubeconfig,
		"--leader-elect=false",
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(ports[0]),
		"--cert-dir", filepath.Join(s.Dir, "scheduler-certs"))
}

// logTails is the end of the etcd and API server logs, for an error message.
func (s *Server) logTails() string { return s.procGroup.logTails("etcd", "kube-apiserver") }

// Stop ends what Start (and StartScheduler) started, in reverse order.
func (s *Server) Stop() { s.stop() }

// writeCredentials writes the service-account signing key pair and a token
// file whose one user is in system:masters, and returns the token.
func writeCredentials(dir string) (string, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", err
	}
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	token := hex.EncodeToString(raw)
	files := map[string][]byte{
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"sa.pub":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv": []byte(token + `,admin,1000,"system:masters"` + "\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return "", err
		}
	}
	return token, nil
}

// writeKubeconfig writes a kubeconfig whose current context reaches url as
// the token's user, verifying the server against ca.
func writeKubeconfig(path, url, ca, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: url, CertificateAuthority: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "kubetest"
	return clientcmd.WriteToFile(*cfg, path)
}

// freePorts asks the kernel for n free loopback ports (held open together
// so they differ).
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
