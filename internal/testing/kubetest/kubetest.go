// Package kubetest runs a real Kubernetes control plane for tests and for
// trying `tt-model k8s` by hand: etcd and kube-apiserver, built from their Go
// modules by scripts/kube-apiserver.sh, on free loopback ports, with all
// their state in one folder, and on request kube-scheduler. No kubelet or
// controller manager runs: objects are validated, admitted, defaulted and
// stored, pods may be bound to Node objects, and no pod is ever started.
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
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
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

	procs []*proc // started order; stopped in reverse
}

// proc is one started binary; done closes once it has been waited for.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start runs etcd and kube-apiserver from binDir with their state under dir
// and returns once /readyz says ok. Their output goes to dir/etcd.log and
// dir/kube-apiserver.log.
func Start(ctx context.Context, binDir, dir string) (s *Server, err error) {
	s = &Server{Dir: dir}
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

// spawn starts one binary in its own process group, output to dir/name.log.
func (s *Server) spawn(bin, name string, args ...string) error {
	log, err := os.Create(filepath.Join(s.Dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	log.Close() // the child holds its own descriptor
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	s.procs = append(s.procs, p)
	return nil
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
		for _, p := range s.procs {
			select {
			case <-p.done:
				return fmt.Errorf("%s exited (%v) before the API server was ready\n%s", p.name, p.err, s.logTails())
			default:
			}
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

// logTails is the end of both logs, for an error message.
func (s *Server) logTails() string {
	var b bytes.Buffer
	for _, name := range []string{"etcd", "kube-apiserver"} {
		data, _ := os.ReadFile(filepath.Join(s.Dir, name+".log"))
		if len(data) > 3000 {
			data = data[len(data)-3000:]
		}
		fmt.Fprintf(&b, "--- %s.log (end)\n%s\n", name, data)
	}
	return b.String()
}

// Stop ends the API server, then etcd: SIGTERM to each process group,
// SIGKILL after 10 s.
func (s *Server) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		pgid := -p.cmd.Process.Pid
		syscall.Kill(pgid, syscall.SIGTERM) //nolint:errcheck // already gone is fine
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			syscall.Kill(pgid, syscall.SIGKILL) //nolint:errcheck // already gone is fine
			<-p.done
		}
	}
	s.procs = nil
}

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
