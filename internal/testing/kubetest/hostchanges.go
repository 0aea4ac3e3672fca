package kubetest

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
)

// The host changes a node makes that its configuration cannot keep under
// its folder: the pod bridge and two FORWARD rules (its own, tagged
// ruleComment: Docker's FORWARD policy is DROP, and with
// bridge-nf-call-iptables every bridged frame passes it), and what the
// kubelet does unasked: kernel tunables, its iptables chains (KUBE-FIREWALL
// and canaries, IPv4 and IPv6), `kubepods` cgroups in every hierarchy, and
// symlinks in /var/log/containers; libcni caches results in /var/lib/cni.
// hostState records what was there before and undoes only what the node
// added: other processes (Docker, other tests) change the same tables
// meanwhile, so nothing is restored from a saved dump.

// kubeletSysctls are the kernel tunables the kubelet sets at start
// (pkg/kubelet/cm setupKernelTunables).
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// iptablesTables are the tables the kubelet adds chains to.
var iptablesTables = []string{"filter", "nat", "mangle"}

type hostState struct {
	dir      string
	sysctls  map[string]string
	chains   map[string][]string // "iptables/filter" → KUBE-* chains there before
	cgroups  map[string]bool     // kubepods folders that existed before
	made     []string            // folders outside dir the node's components may create
	existed  map[string]bool
	bridge   bool // the node created its bridge
	forwards [][]string
}

// recordHost reads the state the node may change.
func recordHost(dir string) (*hostState, error) {
	h := &hostState{dir: dir, sysctls: map[string]string{}, chains: map[string][]string{}, cgroups: map[string]bool{}, existed: map[string]bool{}}
	for _, k := range kubeletSysctls {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
			h.sysctls[k] = strings.TrimSpace(string(b))
		}
	}
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for _, table := range iptablesTables {
			chains, _, err := iptablesChains(cmd, table)
			if err != nil {
				return nil, err
			}
			h.chains[cmd+"/"+table] = chains
		}
	}
	for _, p := range cgroupDirs() {
		h.cgroups[p] = true
	}
	h.made = []string{"/var/log/containers", "/var/lib/cni/results", "/var/lib/cni", "/run/containerd/s", "/run/containerd"}
	for _, d := range h.made {
		if _, err := os.Stat(d); err == nil {
			h.existed[d] = true
		}
	}
	return h, nil
}

// addPodNetwork creates the bridge (the CNI plugin adopts it) and the two
// FORWARD rules. A bridge of that name can only be a crashed run's (the
// machine lock is held), so it is replaced.
func (h *hostState) addPodNetwork() error {
	if _, err := os.Stat("/sys/class/net/" + bridgeName); err == nil {
		slog.Warn("kubetest: removing a bridge an earlier run left", "bridge", bridgeName)
		_ = run("ip", "link", "del", bridgeName)
	}
	for _, args := range [][]string{
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", BridgeIP + "/24", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	} {
		if err := run("ip", args...); err != nil {
			return err
		}
		h.bridge = true
	}
	for _, dir := range []string{"-i", "-o"} {
		rule := []string{"FORWARD", dir, bridgeName, "-m", "comment", "--comment", ruleComment, "-j", "ACCEPT"}
		// A crashed run's rule would be doubled: take it out first.
		for run("iptables", append([]string{"-D"}, rule...)...) == nil {
		}
		if err := run("iptables", append([]string{"-I", rule[0], "1"}, rule[1:]...)...); err != nil {
			return err
		}
		h.forwards = append(h.forwards, rule)
	}
	return nil
}

// undo removes what the node added and restores the tunables it changed.
// Each step goes on past a failure, which it logs.
func (h *hostState) undo() {
	for _, rule := range h.forwards {
		logErr(run("iptables", append([]string{"-D"}, rule...)...))
	}
	if h.bridge {
		logErr(run("ip", "link", "del", bridgeName))
	}
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for _, table := range iptablesTables {
			h.removeChains(cmd, table)
		}
	}
	for k, v := range h.sysctls {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil && strings.TrimSpace(string(b)) != v {
			logErr(os.WriteFile("/proc/sys/"+k, []byte(v), 0o644))
		}
	}
	dirs := cgroupDirs()
	// Deepest first: a cgroup folder is removed once its children are.
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	for _, d := range dirs {
		if !h.cgroups[d] {
			logErr(syscall.Rmdir(d))
		}
	}
	h.removeLinks()
	for _, d := range h.made { // children before parents, as listed
		if !h.existed[d] {
			_ = syscall.Rmdir(d) // only if empty: another runtime may use it now
		}
	}
}

// removeChains deletes the KUBE-* chains of table that were not there
// before, and the rules that jump to them.
func (h *hostState) removeChains(cmd, table string) {
	chains, rules, err := iptablesChains(cmd, table)
	if err != nil {
		logErr(err)
		return
	}
	before := h.chains[cmd+"/"+table]
	var added []string
	for _, c := range chains {
		if !slices.Contains(before, c) {
			added = append(added, c)
		}
	}
	if len(added) == 0 {
		return
	}
	for _, r := range rules {
		f := strings.Fields(r)
		if i := slices.Index(f, "-j"); i > 0 && i+1 < len(f) && slices.Contains(added, f[i+1]) && f[0] == "-A" && !slices.Contains(added, f[1]) {
			logErr(run(cmd, append([]string{"-t", table, "-D"}, f[1:]...)...))
		}
	}
	for _, c := range added {
		logErr(run(cmd, "-t", table, "-F", c))
	}
	for _, c := range added {
		logErr(run(cmd, "-t", table, "-X", c))
	}
}

// removeLinks deletes the /var/log/containers symlinks into the node's
// folder, and libcni's cached results for its network.
func (h *hostState) removeLinks() {
	entries, _ := os.ReadDir("/var/log/containers")
	for _, e := range entries {
		p := filepath.Join("/var/log/containers", e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, h.dir+"/") {
			logErr(os.Remove(p))
		}
	}
	results, _ := filepath.Glob("/var/lib/cni/results/" + cniNetwork + "-*")
	for _, p := range results {
		logErr(os.Remove(p))
	}
}

// iptablesChains lists table's KUBE-* chains and all its rules (-S form).
func iptablesChains(cmd, table string) (chains, rules []string, err error) {
	out, err := exec.Command(cmd, "-w", "5", "-t", table, "-S").Output()
	if err != nil {
		return nil, nil, fmt.Errorf("%s -t %s -S: %w", cmd, table, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if c, ok := strings.CutPrefix(line, "-N "); ok && strings.HasPrefix(c, "KUBE-") {
			chains = append(chains, c)
		}
		if strings.HasPrefix(line, "-A ") {
			rules = append(rules, line)
		}
	}
	return chains, rules, nil
}

// cgroupDirs are the kubepods folders (and all below them) in every cgroup
// hierarchy.
func cgroupDirs() []string {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods*")
	top, _ := filepath.Glob("/sys/fs/cgroup/kubepods*")
	var out []string
	for _, r := range append(roots, top...) {
		_ = filepath.WalkDir(r, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				out = append(out, p)
			}
			return nil
		})
	}
	return out
}

// killShims kills the containerd shims serving the containerd at sock
// (shims outlive containerd by design).
func killShims(sock string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("containerd-shim")) || !bytes.Contains(b, []byte(sock)) {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(p, "/proc/%d/cmdline", &pid); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// unmountUnder unmounts every mount point under dir, deepest first (the
// kubelet bind-mounts its root folder onto itself, containerd mounts
// snapshots and network namespaces).
func unmountUnder(dir string) {
	for range 3 { // a mount revealed by unmounting another is caught next round
		points := mountsUnder(dir)
		if len(points) == 0 {
			return
		}
		for _, p := range points {
			_ = syscall.Unmount(p, syscall.MNT_DETACH)
		}
	}
}

func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// run runs a host command, its output in the error.
func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func logErr(err error) {
	if err != nil {
		slog.Warn("kubetest: undoing a host change", "err", err)
	}
}
