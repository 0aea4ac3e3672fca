package runner

import (
	"path/filepath"
	"strings"
)

// hostMounts maps the container's mount points (what docker.go binds) to the host directories
// behind them, so that a profile's paths mean the same files on the bare host: a profile's
// PI05_HANG_MARKER=/cache/pi05_hang_marker is <state>/cache/pi05_hang_marker for the server and
// the supervisor on the host, the very file a container sees as /cache/pi05_hang_marker.
func hostMounts(spec *Spec) map[string]string {
	return map[string]string{
		containerMetalCache:  filepath.Join(spec.StateDir, "cache"),
		containerWeightCache: filepath.Join(spec.StateDir, "weights"),
		containerHF:          spec.HF.HFHome,
	}
}

// hostEnv rewrites env values that are paths under a container mount point to the host path.
func hostEnv(env map[string]string, mounts map[string]string) map[string]string {
	out := make(map[string]string, len(env))
	for k, v := range env {
		out[k] = v
		for in, host := range mounts {
			if v == in || strings.HasPrefix(v, in+"/") {
				out[k] = host + strings.TrimPrefix(v, in)
			}
		}
	}
	return out
}
