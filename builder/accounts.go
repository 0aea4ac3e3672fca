package builder

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/ttmodel/tt-model/builder/oci"
)

// The image's unprivileged account.
const (
	ttUser   = "tt"
	ImageUID = 1000
	ImageGID = 1000
)

// accountFiles returns /etc/passwd and /etc/group with the tt user and group
// (uid/gid 1000) present: the base's files with a line appended, or, on
// scratch, files holding root and tt. A base that gives uid 1000 or the name
// tt to someone else is refused rather than silently patched.
func accountFiles(base *baseImage) (passwd, group []byte, err error) {
	passwd = base.Passwd
	group = base.Group
	if passwd == nil {
		passwd = []byte("root:x:0:0:root:/root:/sbin/nologin\n")
	}
	if group == nil {
		group = []byte("root:x:0:\n")
	}
	passwd, err = ensureAccount(passwd, "/etc/passwd", ttUser, ImageUID,
		fmt.Sprintf("%s:x:%d:%d:tt-model:/home/tt:/sbin/nologin", ttUser, ImageUID, ImageGID), 2)
	if err != nil {
		return nil, nil, err
	}
	group, err = ensureAccount(group, "/etc/group", ttUser, ImageGID, fmt.Sprintf("%s:x:%d:", ttUser, ImageGID), 2)
	if err != nil {
		return nil, nil, err
	}
	return passwd, group, nil
}

// ensureAccount appends line unless an entry named want with id wantID
// (colon-separated field idField) is already there.
func ensureAccount(data []byte, file, want string, wantID int, line string, idField int) ([]byte, error) {
	id := strconv.Itoa(wantID)
	for n, l := range strings.Split(string(data), "\n") {
		f := strings.Split(l, ":")
		if len(f) <= idField {
			continue
		}
		switch {
		case f[0] == want && f[idField] == id:
			return data, nil
		case f[0] == want:
			return nil, fmt.Errorf("runtime.base: %s line %d gives %s id %s; the image runs as %s %d", file, n+1, want, f[idField], want, wantID)
		case f[idField] == id:
			return nil, fmt.Errorf("runtime.base: %s line %d gives id %d to %q; the image runs as %s %d", file, n+1, wantID, f[0], want, wantID)
		}
	}
	out := bytes.Clone(data)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, line+"\n"...), nil
}

// accountsLayer plans the layer of the tt account: /etc/passwd and
// /etc/group with tt (uid and gid 1000) added, HOME with homeMode, /cache
// and /hf writable by tt, and /tmp when the base has none.
func accountsLayer(fs *oci.Rootfs, base *baseImage, description string, homeMode int64) (*oci.LayerPlan, error) {
	l := fs.Plan(description)
	passwd, group, err := accountFiles(base)
	if err != nil {
		return nil, err
	}
	l.Add(oci.FileEntry("/etc/passwd", 0o644, passwd))
	l.Add(oci.FileEntry("/etc/group", 0o644, group))
	l.Add(oci.DirEntry(ImageHomeDir, homeMode, ImageUID, ImageGID))
	l.Add(oci.DirEntry(ImageCacheDir, 0o775, ImageUID, ImageGID))
	l.Add(oci.DirEntry(ImageHFDir, 0o775, ImageUID, ImageGID))
	if !fs.Tree.IsDir("/tmp") {
		l.Add(oci.DirEntry("/tmp", 0o1777, 0, 0))
	}
	return l.Done(), nil
}
