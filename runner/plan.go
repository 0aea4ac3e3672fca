package runner

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/internal/chips"
	"github.com/ttmodel/tt-model/internal/safename"
	"github.com/ttmodel/tt-model/manifest"
	"github.com/ttmodel/tt-model/server/api"
)

// FirstPort is where the search for a free port starts (manifest.FirstHostPort).
const FirstPort = manifest.FirstHostPort

// Spec is one server to start: everything decided before a runner acts.
type Spec struct {
	Package *Package
	Profile manifest.Profile
	Launch  manifest.Launch // for Port, the server's argv says --port Port
	Name    string
	Port    int
	Bind    string // host address the port is published on ("" = every interface)
	Chips   []int  // nil when the host has no /dev/tenstorrent
	// Weights are the package's snapshots (primary first), nil when the
	// package declares none.
	Weights []*hub.Snapshot
	HF      hub.Config
	// WeightsDir is the host snapshot folder the server reads its weights
	// from (ServedWeights); "" leaves HF_MODEL as the profile sets it.
	WeightsDir string
	// StateDir is ~/.cache/tt-model/<package>: cache/ (TT_METAL_CACHE) and
	// weights/ (the weight cache) live there.
	StateDir  string
	Hugepages bool // /dev/hugepages-1G is a hugetlbfs mount
	// SupervisorFlags are extra `tt-model supervise` flags (for example a
	// site's --reset-cmd), placed before the server argv.
	SupervisorFlags []string
	// APIKeyFile is the host file holding the server's API key ("" none):
	// the server is given the file (mounted read-only in a container), so
	// the key is in no argv, env or log.
	APIKeyFile string
}

// PlanOptions are the serve flags.
type PlanOptions struct {
	Profile   string
	Port      int    // 0: the first free from FirstPort
	Bind      string // host address to publish the port on ("" = every interface, as upstream)
	DeviceIDs string // "": the lowest free chips
	DevDir    string // where chips appear; "" = /dev/tenstorrent
	CacheRoot string // "" = ~/.cache/tt-model
}

// Plan resolves the profile, the port and the chips. others are the
// instances already known (their ports and chips are taken).
func Plan(pkg *Package, others []Instance, opts PlanOptions) (*Spec, error) {
	prof, err := pkg.Wire.Container.ResolveProfile(opts.Profile)
	if err != nil {
		return nil, err
	}
	spec := &Spec{Package: pkg, Profile: prof, Name: InstanceName(pkg.Wire.Name, prof.Name), Bind: opts.Bind}
	if opts.Bind != "" && net.ParseIP(opts.Bind) == nil {
		return nil, fmt.Errorf("--bind %q: want an IP address of this host, e.g. 127.0.0.1", opts.Bind)
	}
	if spec.Port, err = pickPort(opts.Port, opts.Bind, others); err != nil {
		return nil, err
	}
	port := spec.Port
	prof.Port = &port
	repo := ""
	if pkg.Wire.Weights != nil {
		repo = pkg.Wire.Weights.Repo
	}
	if spec.Launch, err = manifest.LaunchFor(pkg.Wire.Container.Kind, pkg.Wire.Container.Runtime, repo, prof); err != nil {
		return nil, fmt.Errorf("profile %s: %w", prof.Name, err)
	}
	devDir := opts.DevDir
	if devDir == "" {
		devDir = chips.DevDir
	}
	need, ok := manifest.ChipCount(prof.Hardware)
	if !ok || need < 1 {
		need = 1
	}
	avail, err := chips.Discover(devDir)
	if err != nil {
		return nil, err
	}
	var requested []int
	if opts.DeviceIDs != "" {
		if requested, err = parseDeviceIDs(opts.DeviceIDs, need, prof.Name); err != nil {
			return nil, err
		}
	}
	if spec.Chips, err = pickChips(avail, usedChips(others), need, requested, devDir); err != nil {
		return nil, err
	}
	root := opts.CacheRoot
	if root == "" {
		if root, err = DefaultCacheRoot(); err != nil {
			return nil, err
		}
	}
	// The name was checked when the manifest was read; the join is checked
	// again because this folder is created and, by rm, deleted.
	if spec.StateDir, err = safename.Join(root, pkg.Wire.Name); err != nil {
		return nil, fmt.Errorf("package name: %w", err)
	}
	spec.Hugepages = hugepagesMounted("/proc/mounts")
	return spec, nil
}

// DefaultCacheRoot is ~/.cache/tt-model (XDG_CACHE_HOME honoured).
func DefaultCacheRoot() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("tt-model cache folder: %w", err)
	}
	return filepath.Join(dir, "tt-model"), nil
}

// ServerEnv is the server's environment for a runner that shows HF_HOME at
// hfHome, the hub cache at hubCache and the kernel cache at metalCache. With
// a WeightsDir, HF_MODEL becomes that snapshot folder as the server sees it
// (upstream's rewrite of a pinned repo id), so the server reads exactly the
// validated files and never asks the Hub. TT_WEIGHT_CACHE, unless the profile
// sets it, is the weight cache mount, where the server keeps its packed
// weights (a host runner maps it to the package's weights folder).
func (s *Spec) ServerEnv(hfHome, hubCache, metalCache string) map[string]string {
	env := map[string]string{"TT_WEIGHT_CACHE": containerWeightCache}
	for k, v := range s.Launch.Env {
		env[k] = v
	}
	env["HF_HOME"] = hfHome
	env["TT_METAL_CACHE"] = metalCache
	if s.APIKeyFile != "" {
		env[api.APIKeyFileEnv] = containerAPIKey
	}
	if s.HF.Token != "" {
		env["HF_TOKEN"] = s.HF.Token
	}
	if s.WeightsDir != "" {
		if rel, err := filepath.Rel(s.HF.CacheDir, s.WeightsDir); err == nil && filepath.IsLocal(rel) {
			env["HF_MODEL"] = filepath.Join(hubCache, rel)
		}
	}
	return env
}

// SortedEnv renders env as sorted KEY=VALUE lines, as upstream passes them.
func SortedEnv(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// pickPort is the requested port, or the first port from FirstPort that no
// instance holds and that can be bound now on bind ("" = every interface).
func pickPort(requested int, bind string, others []Instance) (int, error) {
	taken := map[int]bool{}
	for _, o := range others {
		if o.Running {
			taken[o.Port] = true
		}
	}
	if requested != 0 {
		if requested < 1 || requested > 65535 {
			return 0, fmt.Errorf("--port %d: want 1-65535", requested)
		}
		if taken[requested] || !portFree(bind, requested) {
			return 0, fmt.Errorf("--port %d is in use", requested)
		}
		return requested, nil
	}
	for p := FirstPort; p < FirstPort+1000; p++ {
		if !taken[p] && portFree(bind, p) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port in %d-%d", FirstPort, FirstPort+999)
}

func portFree(bind string, p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(bind, strconv.Itoa(p)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func usedChips(others []Instance) map[int]string {
	used := map[int]string{}
	for _, o := range others {
		if !o.Running {
			continue
		}
		for _, c := range o.Chips {
			used[c] = o.Name
		}
	}
	return used
}

// pickChips chooses need chips: the requested ones (checked), else the
// lowest free ones. A host without chips gets none (the CPU build).
func pickChips(avail []int, used map[int]string, need int, requested []int, devDir string) ([]int, error) {
	if len(avail) == 0 {
		if requested != nil {
			return nil, fmt.Errorf("--device-id %s: this host has no %s", FormatChips(requested), devDir)
		}
		return nil, nil
	}
	if requested != nil {
		for _, c := range requested {
			if !slices.Contains(avail, c) {
				return nil, fmt.Errorf("--device-id: chip %d is not on this host (it has %s)", c, FormatChips(avail))
			}
			if holder, busy := used[c]; busy {
				return nil, fmt.Errorf("--device-id: chip %d is used by %s", c, holder)
			}
		}
		return requested, nil
	}
	var free []int
	for _, c := range avail {
		if _, busy := used[c]; !busy {
			free = append(free, c)
		}
	}
	if len(free) < need {
		return nil, fmt.Errorf("the profile needs %d chip(s); %d of this host's %d are free (%s busy)",
			need, len(free), len(avail), busyList(used))
	}
	return free[:need], nil
}

func busyList(used map[int]string) string {
	var parts []string
	for c, name := range used {
		parts = append(parts, fmt.Sprintf("%d: %s", c, name))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// parseDeviceIDs reads --device-id in the one chip-list grammar
// (internal/chips: "0,1", "0-3"), as many chips as the profile needs.
func parseDeviceIDs(s string, need int, profile string) ([]int, error) {
	ids, err := chips.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("--device-id: %w", err)
	}
	if len(ids) != need {
		return nil, fmt.Errorf("--device-id gives %d chip(s); profile %s needs %d", len(ids), profile, need)
	}
	return ids, nil
}

// hugepagesMounted reports whether /dev/hugepages-1G is a hugetlbfs mount;
// umd matches that exact mount point, so only it counts.
func hugepagesMounted(mounts string) bool {
	f, err := os.Open(mounts)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 2 && fields[1] == "/dev/hugepages-1G" && fields[2] == "hugetlbfs" {
			return true
		}
	}
	return false
}
