// Package oci assembles OCI images from files, below the builder that decides
// what goes in them (as go-containerregistry's mutate and layout sit below
// a tool that uses them): reproducible tar layers (Entry, BuildLayer), the
// planned layers of a growing root file system (Rootfs, LayerPlan, Tree), the
// ELF closure a binary needs in the image (LibSearch, Closure), an image
// unpacked into a directory (UnpackRootfs), an OCI-typed view of a
// Docker-typed image (OCITyped) and the layout written to disk
// (WriteLayout). It knows nothing of manifests, kinds or caches.
package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// GzipLevel is fixed: the compressed bytes, and so every layer digest, depend
// on it. DefaultCompression would tie the digest to whatever compress/gzip
// chooses as its default.
const GzipLevel = 6

// Entry is one file-system object of a layer. Paths are absolute in the
// image ("/usr/local/bin/tt-model"); the tar name drops the leading slash.
type Entry struct {
	Path     string
	Type     byte // tar.TypeDir, tar.TypeReg or tar.TypeSymlink
	Mode     int64
	UID, GID int
	Linkname string // for symlinks
	Data     []byte // for regular files given inline
	Source   string // for regular files read from the host
}

// DirEntry is a directory.
func DirEntry(p string, mode int64, uid, gid int) Entry {
	return Entry{Path: p, Type: tar.TypeDir, Mode: mode, UID: uid, GID: gid}
}

// FileEntry is a regular file given inline.
func FileEntry(p string, mode int64, data []byte) Entry {
	return Entry{Path: p, Type: tar.TypeReg, Mode: mode, Data: data}
}

// HostFileEntry is a regular file read from the host at source.
func HostFileEntry(p string, mode int64, source string) Entry {
	return Entry{Path: p, Type: tar.TypeReg, Mode: mode, Source: source}
}

// LayerBlob is a built layer: the v1.Layer plus the sizes progress and the
// summary report.
type LayerBlob struct {
	Layer        v1.Layer
	Uncompressed int64
	Compressed   int64
	Description  string
	Files        int
	// File holds the compressed blob when the layer cache has it (the OCI
	// layout links it instead of copying); Cached says it was not rebuilt.
	File   string
	Cached bool
	Blob   []byte // the compressed blob, when built here
}

// BuildLayer writes entries as a reproducible gzip'd tar: entries sorted by
// path, every header's uid/gid/mtime fixed, no user or group names, PAX
// records only where a field needs them, and a fixed gzip level. Equal
// inputs give byte-equal blobs, which is what makes the image digest a
// function of its content alone.
func BuildLayer(entries []Entry, epoch time.Time, description string) (LayerBlob, error) {
	sorted := SortedEntries(entries)
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Path == sorted[i-1].Path {
			return LayerBlob{}, fmt.Errorf("layer %q: %s is listed twice", description, sorted[i].Path)
		}
	}

	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, GzipLevel)
	if err != nil {
		return LayerBlob{}, fmt.Errorf("gzip writer: %w", err)
	}
	counter := &countingWriter{w: zw}
	tw := tar.NewWriter(counter)
	for _, e := range sorted {
		if err := writeEntry(tw, e, epoch); err != nil {
			return LayerBlob{}, fmt.Errorf("layer %q: %w", description, err)
		}
	}
	if err := tw.Close(); err != nil {
		return LayerBlob{}, fmt.Errorf("layer %q: close tar: %w", description, err)
	}
	if err := zw.Close(); err != nil {
		return LayerBlob{}, fmt.Errorf("layer %q: close gzip: %w", description, err)
	}
	blob := gz.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(blob)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return LayerBlob{}, fmt.Errorf("layer %q: %w", description, err)
	}
	return LayerBlob{
		Layer:        layer,
		Uncompressed: counter.n,
		Compressed:   int64(len(blob)),
		Description:  description,
		Files:        len(sorted),
		Blob:         blob,
	}, nil
}

// SortedEntries orders entries by path, parents before children.
func SortedEntries(entries []Entry) []Entry {
	sorted := append([]Entry(nil), entries...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	return sorted
}

func writeEntry(tw *tar.Writer, e Entry, epoch time.Time) error {
	name := strings.TrimPrefix(path.Clean(e.Path), "/")
	if name == "" || name == "." {
		return fmt.Errorf("entry with empty path")
	}
	hdr := &tar.Header{
		Name:     name,
		Typeflag: e.Type,
		Mode:     e.Mode,
		Uid:      e.UID,
		Gid:      e.GID,
		ModTime:  epoch,
	}
	switch e.Type {
	case tar.TypeDir:
		hdr.Name += "/"
		return tw.WriteHeader(hdr)
	case tar.TypeSymlink:
		hdr.Linkname = e.Linkname
		return tw.WriteHeader(hdr)
	case tar.TypeReg:
		data := e.Data
		if e.Source != "" {
			b, err := os.ReadFile(e.Source)
			if err != nil {
				return fmt.Errorf("read %s for %s: %w", e.Source, e.Path, err)
			}
			data = b
		}
		hdr.Size = int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("header %s: %w", e.Path, err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("write %s: %w", e.Path, err)
		}
		return nil
	default:
		return fmt.Errorf("%s: unsupported entry type %q", e.Path, e.Type)
	}
}

// HostFileMode keeps only the permission bits of a host file, so that a
// umask or a setuid bit on the build machine never reaches the image.
func HostFileMode(info fs.FileInfo) int64 {
	if info.Mode().Perm()&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
