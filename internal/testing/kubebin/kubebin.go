// Package kubebin finds the kube-apiserver and etcd binaries that
// scripts/kube-apiserver.sh builds once per machine from their Go modules.
// It is the one place that knows their versions and cache folder, for the
// test control plane (internal/testing/kubetest) and the "kube-apiserver" test
// requirement (internal/testing/testenv).
package kubebin

import (
	"fmt"
	"os"
	"path/filepath"
)

// The versions scripts/kube-apiserver.sh builds (keep the two in step); the
// binaries' folder is named after them.
const (
	KubeVersion = "v1.37.2"
	EtcdVersion = "v3.6.16"
)

// Requirement is the internal/testing/testenv name of "both binaries are built".
const Requirement = "kube-apiserver"

// DirEnv names a folder holding kube-apiserver and etcd, instead of the cache.
const DirEnv = "TT_KUBE_BIN"

// CacheEnv overrides the cache root (default ~/.cache/tt-model/k8s,
// XDG_CACHE_HOME honoured), as the script does.
const CacheEnv = "TT_KUBE_CACHE"

// Dir is the folder with both binaries, or an error saying how to build them.
func Dir() (string, error) {
	dir := os.Getenv(DirEnv)
	if dir == "" {
		root := os.Getenv(CacheEnv)
		if root == "" {
			cache, err := os.UserCacheDir()
			if err != nil {
				return "", fmt.Errorf("cache folder: %w", err)
			}
			root = filepath.Join(cache, "tt-model", "k8s")
		}
		dir = filepath.Join(root, "kube-"+KubeVersion+"-etcd-"+EtcdVersion)
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("no %s in %s: build both once with scripts/kube-apiserver.sh build (about 7 min on 2 cores)", name, dir)
		}
	}
	return dir, nil
}

// Scheduler is kube-scheduler in dir (Dir's folder), built beside the API
// server by the same script, or an error saying how to build it.
func Scheduler(dir string) (string, error) {
	p := filepath.Join(dir, "kube-scheduler")
	if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("no kube-scheduler in %s: build it with scripts/kube-apiserver.sh build (a few minutes more once the API server is built)", dir)
	}
	return p, nil
}
