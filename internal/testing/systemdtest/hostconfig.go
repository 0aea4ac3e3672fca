package systemdtest

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/moby/moby/api/types/container"
	"golang.org/x/sys/unix"
)

// hostConfig is what systemd as PID 1 needs from the engine, and no more:
// no --privileged (this engine refuses it without CAP_SYS_ADMIN, and the
// tests must not need it), default capabilities, default seccomp.
func hostConfig(binds []string) (*container.HostConfig, error) {
	cg, err := cgroupSettings()
	if err != nil {
		return nil, err
	}
	return &container.HostConfig{
		// systemd expects /run and /run/lock to be tmpfs it owns (it would
		// mount them itself, which needs CAP_SYS_ADMIN), and a /tmp it can
		// clean: tmpfs from the engine, fresh at each boot.
		Tmpfs: map[string]string{"/run": "mode=755", "/run/lock": "", "/tmp": ""},
		// The cgroup form depends on the host (see cgroupSettings).
		CgroupnsMode: cg.ns,
		Binds:        append(cg.binds, binds...),
	}, nil
}

// cgroups is how the container sees the host's cgroup tree.
type cgroups struct {
	ns    container.CgroupnsMode
	binds []string
}

// cgroupSettings picks the cgroup mounts for the host's layout. systemd
// puts every unit in a cgroup of its own: it must find a cgroup tree it can
// write below its own cgroup, or it refuses to boot.
//
//   - cgroup v2 (/sys/fs/cgroup is cgroup2): the host's namespace and the
//     tree bound read-write. With a private namespace the engine mounts the
//     container's part read-only unless --privileged. Not exercised on the
//     machines these tests were written on (v1).
//   - cgroup v1 (/sys/fs/cgroup is a tmpfs holding one mount per hierarchy,
//     name=systemd among them): the tmpfs bound read-only, so nothing can be
//     added to the host's top level, and each hierarchy under it bound
//     read-write on its own, so systemd can make its units' cgroups below
//     the container's (/proc/1/cgroup says /docker/<id>). Binding each one
//     explicitly keeps working on engines (Docker 25+) whose ":ro" is
//     recursive. The namespace stays the host's, the v1 default.
//
// Either way the container's root can write to the host's cgroup files: it
// is a test machine's container, removed when the test ends.
func cgroupSettings() (cgroups, error) {
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		return cgroups{}, fmt.Errorf("inspect /sys/fs/cgroup: %w", err)
	}
	switch st.Type {
	case unix.CGROUP2_SUPER_MAGIC:
		return cgroups{ns: container.CgroupnsModeHost, binds: []string{"/sys/fs/cgroup:/sys/fs/cgroup:rw"}}, nil
	case unix.TMPFS_MAGIC:
		hierarchies, err := cgroupMounts("/proc/self/mountinfo")
		if err != nil {
			return cgroups{}, err
		}
		if len(hierarchies) == 0 {
			return cgroups{}, fmt.Errorf("/sys/fs/cgroup is a tmpfs without cgroup hierarchies under it")
		}
		binds := []string{"/sys/fs/cgroup:/sys/fs/cgroup:ro"}
		for _, m := range hierarchies {
			binds = append(binds, m+":"+m+":rw")
		}
		return cgroups{ns: container.CgroupnsModeHost, binds: binds}, nil
	}
	return cgroups{}, fmt.Errorf("/sys/fs/cgroup is neither cgroup2 nor a tmpfs of v1 hierarchies (filesystem magic %#x)", st.Type)
}

// cgroupMounts lists the cgroup and cgroup2 mount points below
// /sys/fs/cgroup/ in a mountinfo file.
func cgroupMounts(mountinfo string) ([]string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, fmt.Errorf("list the cgroup hierarchies: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		fstype, point := fields[sep+1], fields[4]
		if (fstype == "cgroup" || fstype == "cgroup2") && strings.HasPrefix(point, "/sys/fs/cgroup/") {
			out = append(out, point)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", mountinfo, err)
	}
	return out, nil
}
