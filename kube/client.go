package kube

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// ConnectOptions choose the cluster: the user's kubeconfig as kubectl finds
// it (--kubeconfig, else $KUBECONFIG, else ~/.kube/config) and its context.
type ConnectOptions struct {
	Kubeconfig string
	Context    string
	// Timeout bounds each request, and the first one that checks the API
	// server answers; 0 = 15 s.
	Timeout time.Duration
	// Warnings receives each warning the API server sends, one line each;
	// nil = they are only recorded (Cluster.Warnings).
	Warnings io.Writer
	// UserAgent names the client in the API server's logs.
	UserAgent string
}

// Cluster is an API server reached through a kubeconfig.
type Cluster struct {
	Host      string // the API server's URL
	Where     string // kubeconfig and context, for messages
	Namespace string // the context's namespace, else "default"

	dyn  dynamic.Interface
	core corev1client.CoreV1Interface
	apps appsv1client.AppsV1Interface
	warn *warningLog
}

// Connect loads the kubeconfig and checks that its API server answers
// (GET /version) within the timeout, so a dead or wrong cluster is one
// clear error before anything is sent.
func Connect(ctx context.Context, opts ConnectOptions) (*Cluster, error) {
	if opts.Timeout == 0 {
		opts.Timeout = 15 * time.Second
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = opts.Kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: opts.Context})
	where := describeKubeconfig(rules, cc, opts.Context)
	if !anyExists(rules) && os.Getenv("KUBERNETES_SERVICE_HOST") == "" { // in a pod, clientcmd uses its service account
		return nil, fmt.Errorf("%s: no such file (name a kubeconfig with --kubeconfig or $KUBECONFIG)", where)
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %w (name a kubeconfig with --kubeconfig or $KUBECONFIG)", where, err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("%s: namespace: %w", where, err)
	}
	cfg.Timeout = opts.Timeout
	// client-go's default of 5 requests a second would pace even one apply.
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = opts.UserAgent
	warn := &warningLog{out: opts.Warnings}
	cfg.WarningHandler = warn
	c := &Cluster{Host: cfg.Host, Where: where, Namespace: ns, warn: warn}
	if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if c.core, err = corev1client.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if c.apps, err = appsv1client.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	pctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if _, err := c.core.RESTClient().Get().AbsPath("/version").DoRaw(pctx); err != nil {
		return nil, fmt.Errorf("the API server %s (%s) does not answer: %w", cfg.Host, where, err)
	}
	return c, nil
}

// describeKubeconfig names the files and the context in use.
func describeKubeconfig(rules *clientcmd.ClientConfigLoadingRules, cc clientcmd.ClientConfig, context string) string {
	files := rules.GetLoadingPrecedence()
	if rules.ExplicitPath != "" {
		files = []string{rules.ExplicitPath}
	}
	if context == "" {
		if raw, err := cc.RawConfig(); err == nil {
			context = raw.CurrentContext
		}
	}
	if context == "" {
		return fmt.Sprintf("kubeconfig %s (no current context)", strings.Join(files, ":"))
	}
	return fmt.Sprintf("kubeconfig %s, context %q", strings.Join(files, ":"), context)
}

// anyExists reports whether a kubeconfig file the rules name exists
// (clientcmd skips missing ones silently and then reports only that no
// configuration was given).
func anyExists(rules *clientcmd.ClientConfigLoadingRules) bool {
	files := rules.GetLoadingPrecedence()
	if rules.ExplicitPath != "" {
		files = []string{rules.ExplicitPath}
	}
	for _, f := range files {
		if _, err := os.Stat(f); err == nil {
			return true
		}
	}
	return false
}

// Warnings are the warnings the API server sent on this connection so far.
func (c *Cluster) Warnings() []string { return c.warn.all() }

// warningLog is client-go's warning handler: it keeps every warning (the
// tests require none) and prints it when asked to.
type warningLog struct {
	out  io.Writer
	mu   sync.Mutex
	seen []string
}

func (w *warningLog) HandleWarningHeader(code int, agent, text string) {
	if code != 299 || text == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
	if w.out != nil {
		fmt.Fprintf(w.out, "warning from the API server: %s\n", text)
	}
}

func (w *warningLog) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}
