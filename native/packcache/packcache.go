// Package packcache keeps a model's packed weights (the kernels' weight arena: bf16 panels, biases,
// norm vectors, the embedding, exactly as the kernels use them) in one file per checkpoint and
// precision, written once after the model was packed from its checkpoint and mapped read-only at
// the next start instead of converting the checkpoint again.
//
// A file is found by its Key (model, checkpoint identity, precision, the kernels' layout id) and
// trusted only when its header repeats that key exactly, its size is the header's, and every 64 MiB
// chunk of the payload has the CRC-32C the header lists; otherwise it is removed and the model is
// packed again. Files are written under a temporary name (locked while written) and renamed into
// place, so a crash or a full disk never leaves a partial file under a real name.
package packcache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Settings.
const (
	// EnvDir names the cache folder; "off" disables the cache.
	EnvDir = "TT_WEIGHT_CACHE"
	// ContainerDir is where `tt-model serve` mounts the package's weight cache in a container
	// (the host's ~/.cache/tt-model/<package>/weights).
	ContainerDir = "/weight-cache"
)

const (
	magic      = "TTPACK01"
	format     = 1
	chunkBytes = 64 << 20
	pageBytes  = 4096
	suffix     = ".ttpack"
	tmpMark    = ".tmp-"
)

// ResolveDir is the cache folder: TT_WEIGHT_CACHE when set ("off": none, returned as ""), else
// /weight-cache when it is a folder (the container's mount), else the user's cache folder
// ($XDG_CACHE_HOME, else ~/.cache) /tt-model/weights.
func ResolveDir(getenv func(string) string) (string, error) {
	switch v := getenv(EnvDir); {
	case v == "off":
		return "", nil
	case v != "":
		if !filepath.IsAbs(v) {
			return "", fmt.Errorf("%s=%q: want an absolute folder, or off", EnvDir, v)
		}
		return v, nil
	}
	if st, err := os.Stat(ContainerDir); err == nil && st.IsDir() {
		return ContainerDir, nil
	}
	base := getenv("XDG_CACHE_HOME")
	if base == "" {
		home := getenv("HOME")
		if home == "" {
			return "", fmt.Errorf("%s is unset and neither %s, XDG_CACHE_HOME nor HOME gives a folder (set %s=off to run without)", EnvDir, ContainerDir, EnvDir)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "tt-model", "weights"), nil
}

// Key identifies one packed form of one checkpoint.
type Key struct {
	Model     string `json:"model"`     // "pi05", "rfdetr"
	Source    string `json:"source"`    // SourceID of the checkpoint file
	Precision string `json:"precision"` // the kernels' precision ("bf16", "fp32", ...)
	Layout    string `json:"layout"`    // the kernels' layout id of the packed bytes (hex)
}

func (k Key) hash() string {
	b, _ := json.Marshal(k)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}

// FileName is the key's file in a cache folder: model and precision readable, then a hash.
func (k Key) FileName() string { return k.family() + k.hash() + suffix }

// family is the prefix every file of the same model and precision shares (older checkpoints'
// files are removed when a new one is stored).
func (k Key) family() string { return k.Model + "-" + k.Precision + "-" }

// SourceID names a checkpoint file's content without reading the whole file. In a Hugging Face
// cache the file is a link to blobs/<etag>, the Hub's content hash (the sha256 of an LFS file, which
// the download verified), so the id is that hash. Elsewhere it is the file's size, its modification
// time in nanoseconds and the sha256 of its safetensors header (every tensor's name, dtype, shape and
// offset): an edited or replaced file changes at least one of them.
func SourceID(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("checkpoint identity: %w", err)
	}
	name := filepath.Base(real)
	if filepath.Base(filepath.Dir(real)) == "blobs" && isHex(name) && (len(name) == 64 || len(name) == 40) {
		if len(name) == 64 {
			return "sha256:" + name, nil
		}
		return "git-sha1:" + name, nil
	}
	f, err := os.Open(real)
	if err != nil {
		return "", fmt.Errorf("checkpoint identity: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("checkpoint identity: %w", err)
	}
	var n [8]byte
	if _, err := f.ReadAt(n[:], 0); err != nil {
		return "", fmt.Errorf("checkpoint identity: %s: header length: %w", path, err)
	}
	hlen := binary.LittleEndian.Uint64(n[:])
	if hlen > 100<<20 || int64(hlen)+8 > st.Size() {
		return "", fmt.Errorf("checkpoint identity: %s: header of %d bytes in a file of %d", path, hlen, st.Size())
	}
	hdr := make([]byte, hlen)
	if _, err := f.ReadAt(hdr, 8); err != nil {
		return "", fmt.Errorf("checkpoint identity: %s: header: %w", path, err)
	}
	s := sha256.Sum256(hdr)
	return fmt.Sprintf("file:%d:%d:%s", st.Size(), st.ModTime().UnixNano(), hex.EncodeToString(s[:16])), nil
}

func isHex(s string) bool {
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return s != ""
}

// header is the JSON at the start of a file, after the magic and its length.
type header struct {
	Format  int      `json:"format"`
	Key     Key      `json:"key"`
	Offset  int64    `json:"offset"` // where the payload starts (page aligned)
	Bytes   int64    `json:"bytes"`
	Chunk   int64    `json:"chunk"`
	CRC32C  []uint32 `json:"crc32c"` // per chunk of the payload
	Written string   `json:"written"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// chunkCRCs checksums data in chunks on up to GOMAXPROCS goroutines, calling tick after each.
func chunkCRCs(ctx context.Context, data []byte, tick func(done int64)) ([]uint32, error) {
	n := (len(data) + chunkBytes - 1) / chunkBytes
	out := make([]uint32, n)
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var done int64
	for range min(runtime.GOMAXPROCS(0), max(n, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				end := min((i+1)*chunkBytes, len(data))
				out[i] = crc32.Checksum(data[i*chunkBytes:end], castagnoli)
				mu.Lock()
				done += int64(end - i*chunkBytes)
				if tick != nil {
					tick(done)
				}
				mu.Unlock()
			}
		}()
	}
	var err error
	for i := 0; i < n; i++ {
		if err = ctx.Err(); err != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return out, err
}

// progress logs at most every 2 s, and once at the end.
type progress struct {
	log   *slog.Logger
	msg   string
	total int64
	last  time.Time
}

func (p *progress) tick(done int64) {
	if p.log == nil || (time.Since(p.last) < 2*time.Second && done < p.total) {
		return
	}
	p.last = time.Now()
	p.log.Info(p.msg, "gb", fmt.Sprintf("%.2f/%.2f", float64(done)/1e9, float64(p.total)/1e9))
}

// Mapped is a cache file mapped read-only; Data is the payload.
type Mapped struct {
	Data []byte
	Path string
	all  []byte
}

// Close unmaps the file; Data must not be used after.
func (m *Mapped) Close() error {
	if m.all == nil {
		return nil
	}
	err := unix.Munmap(m.all)
	m.all, m.Data = nil, nil
	return err
}

// Load maps the file of key from dir when it is there and whole: the header repeats key, the size
// and every chunk's CRC-32C match (the check reads the payload once, in parallel, which also pages
// it in). It returns (nil, reason, nil) on a miss; a file that fails a check is removed (reason
// says why) so the model is packed and stored again.
func Load(ctx context.Context, dir string, key Key, log *slog.Logger) (*Mapped, string, error) {
	path := filepath.Join(dir, key.FileName())
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, "no packed weights for this checkpoint yet", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("packed weights %s: %w", path, err)
	}
	defer f.Close()
	reject := func(why string) (*Mapped, string, error) {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, "", fmt.Errorf("packed weights %s are %s and cannot be removed: %w", path, why, err)
		}
		return nil, fmt.Sprintf("%s: %s (removed)", path, why), nil
	}
	h, err := readHeader(f)
	if err != nil {
		return reject(err.Error())
	}
	if h.Key != key {
		return reject(fmt.Sprintf("written for %+v, not %+v", h.Key, key))
	}
	st, err := f.Stat()
	if err != nil {
		return nil, "", fmt.Errorf("packed weights %s: %w", path, err)
	}
	if st.Size() != h.Offset+h.Bytes || h.Chunk != chunkBytes || int64(len(h.CRC32C)) != (h.Bytes+chunkBytes-1)/chunkBytes {
		return reject(fmt.Sprintf("%d bytes on disk, the header says %d + %d", st.Size(), h.Offset, h.Bytes))
	}
	all, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, "", fmt.Errorf("packed weights %s: mmap: %w", path, err)
	}
	m := &Mapped{Data: all[h.Offset:], Path: path, all: all}
	_ = unix.Madvise(m.Data, unix.MADV_WILLNEED)
	p := &progress{log: log, msg: "checking packed weights", total: h.Bytes, last: time.Now()}
	crcs, err := chunkCRCs(ctx, m.Data, p.tick)
	if err != nil {
		_ = m.Close()
		return nil, "", err
	}
	for i, c := range crcs {
		if c != h.CRC32C[i] {
			_ = m.Close()
			return reject(fmt.Sprintf("chunk %d has CRC-32C %08x, the header says %08x", i, c, h.CRC32C[i]))
		}
	}
	return m, "", nil
}

// Wanted is the packed form a model server looks for: the key's model, the checkpoint file it
// packs, the precision and the kernels' layout id; What names the model in log lines ("pi05",
// "rf-detr").
type Wanted struct {
	Model, What, Checkpoint, Precision string
	Layout                             uint64
}

// Open maps the packed form w from dir when the cache has it whole and hands the mapping to open,
// which owns it from then on (it is unmapped here when open fails). With nothing usable cached it
// logs why and returns the zero T; the key comes back either way, for the caller to store the
// weights it packs from the checkpoint under.
func Open[T any](ctx context.Context, dir string, w Wanted, log *slog.Logger, open func(*Mapped) (T, error)) (Key, T, error) {
	var none T
	source, err := SourceID(w.Checkpoint)
	if err != nil {
		return Key{}, none, err
	}
	key := Key{Model: w.Model, Source: source, Precision: w.Precision, Layout: fmt.Sprintf("%016x", w.Layout)}
	mapped, why, err := Load(ctx, dir, key, log)
	if err != nil || mapped == nil {
		if err == nil {
			log.Info(w.What+" packing the checkpoint", "why", why)
		}
		return key, none, err
	}
	v, err := open(mapped)
	if err != nil {
		_ = mapped.Close()
		return key, none, fmt.Errorf("packed weights %s: %w", mapped.Path, err)
	}
	return key, v, nil
}

func readHeader(f *os.File) (*header, error) {
	var pre [16]byte
	if _, err := f.ReadAt(pre[:], 0); err != nil {
		return nil, fmt.Errorf("no header (%v)", err)
	}
	if string(pre[:8]) != magic {
		return nil, fmt.Errorf("not a packed-weights file (magic %q)", pre[:8])
	}
	n := binary.LittleEndian.Uint64(pre[8:])
	if n > 1<<20 {
		return nil, fmt.Errorf("a header of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 16); err != nil {
		return nil, fmt.Errorf("header: %v", err)
	}
	var h header
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("header: %v", err)
	}
	if h.Format != format {
		return nil, fmt.Errorf("format %d, this build reads %d", h.Format, format)
	}
	if h.Offset%pageBytes != 0 || h.Offset < int64(16+n) || h.Bytes <= 0 {
		return nil, fmt.Errorf("payload at %d of %d bytes", h.Offset, h.Bytes)
	}
	return &h, nil
}

// Store writes data as the file of key in dir: under a locked temporary name, fsynced, then
// renamed into place. Files of the same model and precision for other keys (an older checkpoint,
// another build's layout) are removed after, as are temporary files no process holds any more.
// data must not change meanwhile. It fails without leaving a file when the disk is too small.
func Store(ctx context.Context, dir string, key Key, data []byte, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("packed weights: %w", err)
	}
	removeAbandoned(dir)
	final := filepath.Join(dir, key.FileName())
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err == nil {
		if free := int64(fs.Bavail) * int64(fs.Bsize); free < int64(len(data))+(256<<20) {
			return fmt.Errorf("packed weights: %s has %.2f GB free, %.2f GB are needed", dir, float64(free)/1e9, float64(len(data))/1e9)
		}
	}
	f, err := os.CreateTemp(dir, "."+key.FileName()+tmpMark+"*")
	if err != nil {
		return fmt.Errorf("packed weights: %w", err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fmt.Errorf("packed weights: lock %s: %w", tmp, err)
	}
	p := &progress{log: log, msg: "checksumming packed weights", total: int64(len(data)), last: time.Now()}
	crcs, err := chunkCRCs(ctx, data, p.tick)
	if err != nil {
		return err
	}
	h := header{Format: format, Key: key, Bytes: int64(len(data)), Chunk: chunkBytes, CRC32C: crcs,
		Written: time.Now().UTC().Format(time.RFC3339)}
	hj, err := json.Marshal(h)
	if err != nil {
		return err
	}
	h.Offset = (16 + int64(len(hj)) + 64 + pageBytes - 1) / pageBytes * pageBytes // room for the offset's digits
	if hj, err = json.Marshal(h); err != nil {
		return err
	}
	var head bytes.Buffer
	head.WriteString(magic)
	_ = binary.Write(&head, binary.LittleEndian, uint64(len(hj)))
	head.Write(hj)
	head.Write(make([]byte, int(h.Offset)-head.Len()))
	if _, err := f.Write(head.Bytes()); err != nil {
		return fmt.Errorf("packed weights: write %s: %w", tmp, err)
	}
	p = &progress{log: log, msg: "writing packed weights", total: int64(len(data)), last: time.Now()}
	for off := 0; off < len(data); off += chunkBytes {
		if err := ctx.Err(); err != nil {
			return err
		}
		end := min(off+chunkBytes, len(data))
		if _, err := f.Write(data[off:end]); err != nil {
			return fmt.Errorf("packed weights: write %s: %w", tmp, err)
		}
		p.tick(int64(end))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("packed weights: sync %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("packed weights: %w", err)
	}
	ok = true
	_ = f.Close() // drops the lock
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	removeFamily(dir, key)
	return nil
}

// removeFamily removes the other files of key's model and precision.
func removeFamily(dir string, key Key) {
	matches, _ := filepath.Glob(filepath.Join(dir, key.family()+"*"+suffix))
	for _, m := range matches {
		if filepath.Base(m) != key.FileName() {
			_ = os.Remove(m)
		}
	}
}

// removeAbandoned removes temporary files whose writer is gone (their lock is free).
func removeAbandoned(dir string) {
	matches, _ := filepath.Glob(filepath.Join(dir, ".*"+suffix+tmpMark+"*"))
	for _, m := range matches {
		f, err := os.Open(m)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			_ = os.Remove(m)
		}
		_ = f.Close()
	}
}

// Pending is a Store running in the background (StoreInBackground). A nil Pending has nothing to
// wait for.
type Pending struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// StoreInBackground runs Store from a goroutine and logs its outcome under what ("pi05",
// "rf-detr"); data must stay valid and unchanged until Wait or Stop returns.
func StoreInBackground(dir string, key Key, data []byte, what string, log *slog.Logger) *Pending {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pending{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		start := time.Now()
		p.err = Store(ctx, dir, key, data, log)
		if p.err != nil {
			log.Warn(what+" packed weights not kept; the next start packs again", "err", p.err)
		} else {
			log.Info(what+" packed weights kept", "file", key.FileName(), "dir", dir, "seconds", time.Since(start).Seconds())
		}
	}()
	return p
}

// Wait waits for the store to end and returns its error.
func (p *Pending) Wait() error {
	if p == nil {
		return nil
	}
	<-p.done
	return p.err
}

// Stop cancels the store (its temporary file is removed) and waits for it.
func (p *Pending) Stop() {
	if p != nil {
		p.cancel()
		<-p.done
	}
}
