package builder

import (
	"archive/tar"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/builder/oci"
)

func TestBuildLayerIsAFunctionOfItsEntries(t *testing.T) {
	epoch := time.Unix(1700000000, 0)
	entries := []oci.Entry{
		oci.DirEntry("/etc", 0o755, 0, 0),
		oci.FileEntry("/etc/passwd", 0o644, []byte("root:x:0:0::/root:/sbin/nologin\n")),
		oci.DirEntry("/cache", 0o775, ImageUID, ImageGID),
		{Path: "/lib64", Type: tar.TypeSymlink, Linkname: "usr/lib64"},
	}
	reversed := []oci.Entry{entries[3], entries[2], entries[1], entries[0]}
	a, err := oci.BuildLayer(entries, epoch, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := oci.BuildLayer(reversed, epoch, "b")
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Layer.Digest()
	db, _ := b.Layer.Digest()
	if da != db {
		t.Errorf("the same entries in another order: %s vs %s", da, db)
	}
	c, err := oci.BuildLayer(entries, epoch.Add(time.Second), "c")
	if err != nil {
		t.Fatal(err)
	}
	if dc, _ := c.Layer.Digest(); dc == da {
		t.Errorf("another epoch gave the same digest")
	}

	rc, err := a.Layer.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var names []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		if !hdr.ModTime.Equal(epoch) || hdr.Uname != "" || hdr.Gname != "" {
			t.Errorf("%s: mtime %v uname %q gname %q, want the epoch and no names", hdr.Name, hdr.ModTime, hdr.Uname, hdr.Gname)
		}
		if hdr.Name == "cache/" && (hdr.Uid != ImageUID || hdr.Gid != ImageGID || hdr.Mode != 0o775) {
			t.Errorf("cache/: %d:%d %o, want 1000:1000 775", hdr.Uid, hdr.Gid, hdr.Mode)
		}
	}
	if got := strings.Join(names, " "); got != "cache/ etc/ etc/passwd lib64" {
		t.Errorf("entries %q, want sorted cache/ etc/ etc/passwd lib64", got)
	}
	if a.Uncompressed == 0 || a.Compressed == 0 {
		t.Errorf("sizes %d/%d", a.Compressed, a.Uncompressed)
	}

	if _, err := oci.BuildLayer(append(entries, entries[0]), epoch, "dup"); err == nil || !strings.Contains(err.Error(), "/etc is listed twice") {
		t.Errorf("duplicate path: %v", err)
	}
}

func TestAccountFiles(t *testing.T) {
	for _, tc := range []struct {
		name, passwd, group, want, err string
	}{
		{name: "scratch", want: "root:x:0:0:root:/root:/sbin/nologin\ntt:x:1000:1000:tt-model:/home/tt:/sbin/nologin\n"},
		{name: "base without tt", passwd: "root:x:0:0::/root:/bin/sh", group: "root:x:0:\n",
			want: "root:x:0:0::/root:/bin/sh\ntt:x:1000:1000:tt-model:/home/tt:/sbin/nologin\n"},
		{name: "base with tt", passwd: "root:x:0:0::/root:/bin/sh\ntt:x:1000:1000::/home/tt:/bin/sh\n", group: "tt:x:1000:\n",
			want: "root:x:0:0::/root:/bin/sh\ntt:x:1000:1000::/home/tt:/bin/sh\n"},
		{name: "uid 1000 taken", passwd: "ubuntu:x:1000:1000::/home/ubuntu:/bin/bash\n", err: `gives id 1000 to "ubuntu"`},
		{name: "tt with another uid", passwd: "tt:x:1001:1001::/home/tt:/bin/sh\n", err: "gives tt id 1001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := &baseImage{}
			if tc.passwd != "" {
				base.Passwd = []byte(tc.passwd)
				base.Group = []byte(tc.group)
			}
			passwd, group, err := accountFiles(base)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(passwd) != tc.want {
				t.Errorf("passwd:\n%s\nwant:\n%s", passwd, tc.want)
			}
			if !strings.Contains(string(group), "tt:x:1000:") {
				t.Errorf("group has no tt:\n%s", group)
			}
		})
	}
}
