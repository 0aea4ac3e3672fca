package safetensors

import (
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"syscall"
	"unsafe"
)

// File is an opened checkpoint. Views returned by Bytes and Float32 alias the
// read-only mapping: they stay valid until Close and must not be written.
type File struct {
	path     string
	buf      []byte // the whole file
	mapped   bool   // buf came from mmap and must be unmapped
	data     []byte // the data section of buf
	tensors  map[string]TensorInfo
	metadata map[string]string
}

// Open maps path read-only and parses its header.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: stat %s: %w", path, err)
	}
	size := st.Size()
	if size < 8 {
		return nil, fmt.Errorf("safetensors: %s: file is %d bytes, shorter than the 8-byte header length", path, size)
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("safetensors: %s: %d bytes do not fit in the address space", path, size)
	}
	buf, err := syscall.Mmap(int(fd.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("safetensors: mmap %s: %w", path, err)
	}
	f, err := newFile(path, buf)
	if err != nil {
		_ = syscall.Munmap(buf)
		return nil, err
	}
	f.mapped = true
	return f, nil
}

// FromBytes parses a checkpoint held in memory (tests, fuzzing). The File
// keeps buf; name is used in error messages.
func FromBytes(name string, buf []byte) (*File, error) {
	return newFile(name, buf)
}

func newFile(path string, buf []byte) (*File, error) {
	tensors, meta, dataStart, err := parseHeader(buf)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	return &File{path: path, buf: buf, data: buf[dataStart:], tensors: tensors, metadata: meta}, nil
}

// Close releases the mapping. Views obtained earlier must not be used after.
func (f *File) Close() error {
	if f.buf == nil {
		return nil
	}
	var err error
	if f.mapped {
		err = syscall.Munmap(f.buf)
	}
	f.buf, f.data = nil, nil
	if err != nil {
		return fmt.Errorf("safetensors: munmap %s: %w", f.path, err)
	}
	return nil
}

// Path is the file the checkpoint was read from.
func (f *File) Path() string { return f.path }

// Metadata is the header's optional "__metadata__" map.
func (f *File) Metadata() map[string]string { return f.metadata }

// Names lists the tensor names in sorted order.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.tensors))
	for n := range f.tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Info describes one tensor.
func (f *File) Info(name string) (TensorInfo, bool) {
	t, ok := f.tensors[name]
	return t, ok
}

// Bytes is a zero-copy view of a tensor's raw little-endian bytes.
func (f *File) Bytes(name string) ([]byte, error) {
	t, ok := f.tensors[name]
	if !ok {
		return nil, fmt.Errorf("safetensors: %s: no tensor %q", f.path, name)
	}
	if f.data == nil {
		return nil, fmt.Errorf("safetensors: %s: tensor %q read after Close", f.path, name)
	}
	return f.data[t.Begin:t.End:t.End], nil
}

// Float32 returns a tensor's values as float32. An F32 tensor whose bytes are
// 4-aligned is returned as a zero-copy view of the mapping (read-only, valid
// until Close); BF16 and F16 tensors, and unaligned F32 ones, are converted
// into a new slice, so a loader streaming tensor by tensor holds one
// converted tensor at a time.
func (f *File) Float32(name string) ([]float32, error) {
	raw, err := f.Bytes(name)
	if err != nil {
		return nil, err
	}
	t := f.tensors[name]
	n := int(t.NumElements())
	if t.DType == F32 && n > 0 && littleEndianHost() && uintptr(unsafe.Pointer(&raw[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&raw[0])), n), nil
	}
	out := make([]float32, n)
	if err := decodeFloat32(out, raw, t.DType); err != nil {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: %w", f.path, name, err)
	}
	return out, nil
}

// Release tells the kernel a tensor's pages are no longer needed, so a
// loader that has packed a tensor elsewhere does not keep its file pages
// resident too (peak RSS stays near the packed size). Views of the tensor
// remain valid: touching them again re-reads the file. Pages shared with a
// neighbouring tensor are kept. A no-op for in-memory files.
func (f *File) Release(name string) error {
	t, ok := f.tensors[name]
	if !ok || !f.mapped || f.buf == nil {
		return nil
	}
	page := int64(os.Getpagesize())
	start := int64(len(f.buf)-len(f.data)) + t.Begin
	end := int64(len(f.buf)-len(f.data)) + t.End
	start = (start + page - 1) / page * page
	end = end / page * page
	if end <= start {
		return nil
	}
	if err := syscall.Madvise(f.buf[start:end], syscall.MADV_DONTNEED); err != nil {
		return fmt.Errorf("safetensors: %s: release %q: %w", f.path, name, err)
	}
	return nil
}

// littleEndianHost reports whether the machine stores words as the file does;
// only then can F32 bytes be viewed as []float32 in place.
func littleEndianHost() bool {
	return binary.NativeEndian.Uint16([]byte{1, 0}) == 1
}
