package packcache

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)) }

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>9)
	}
	return b
}

func TestResolveDir(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, c := range []struct {
		env     func(string) string
		want    string
		wantErr string
	}{
		{env(EnvDir, "/srv/packed"), "/srv/packed", ""},
		{env(EnvDir, "off", "HOME", "/home/u"), "", ""},
		{env(EnvDir, "rel/dir"), "", "absolute"},
		{env("XDG_CACHE_HOME", "/x/cache", "HOME", "/home/u"), "/x/cache/tt-model/weights", ""},
		{env("HOME", "/home/u"), "/home/u/.cache/tt-model/weights", ""},
		{env(), "", "HOME"},
	} {
		got, err := ResolveDir(c.env)
		if _, statErr := os.Stat(ContainerDir); statErr == nil && c.env(EnvDir) == "" {
			continue // this machine has the container's folder: the default is it
		}
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: err %v, want one naming %s", c.env(EnvDir), err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q, %v; want %q", c.env(EnvDir), got, err, c.want)
		}
	}
}

// writeSafetensors writes a minimal safetensors file (one F32 tensor).
func writeSafetensors(t *testing.T, path, name string) {
	t.Helper()
	hdr := []byte(`{"` + name + `":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`)
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, uint64(len(hdr)))
	b.Write(hdr)
	b.Write(make([]byte, 8))
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSourceID(t *testing.T) {
	dir := t.TempDir()
	// a Hugging Face cache: snapshots/<rev>/model.safetensors -> ../../blobs/<sha256>
	blob := strings.Repeat("ab", 32)
	must(t, os.MkdirAll(filepath.Join(dir, "hf", "blobs"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, "hf", "snapshots", "rev"), 0o755))
	writeSafetensors(t, filepath.Join(dir, "hf", "blobs", blob), "w")
	link := filepath.Join(dir, "hf", "snapshots", "rev", "model.safetensors")
	must(t, os.Symlink("../../blobs/"+blob, link))
	if id, err := SourceID(link); err != nil || id != "sha256:"+blob {
		t.Errorf("HF cache file: %q, %v; want the blob's sha256", id, err)
	}

	plain := filepath.Join(dir, "model.safetensors")
	writeSafetensors(t, plain, "w")
	a, err := SourceID(plain)
	if err != nil || !strings.HasPrefix(a, "file:") {
		t.Fatalf("plain file: %q, %v", a, err)
	}
	if b, _ := SourceID(plain); b != a {
		t.Errorf("the same file twice: %q then %q", a, b)
	}
	later := time.Now().Add(time.Hour)
	must(t, os.Chtimes(plain, later, later))
	if b, _ := SourceID(plain); b == a {
		t.Error("a new modification time keeps the id")
	}
	writeSafetensors(t, plain, "v") // same size, another header
	must(t, os.Chtimes(plain, later, later))
	if b, _ := SourceID(plain); b == a {
		t.Error("another header keeps the id")
	}
	must(t, os.WriteFile(plain, []byte{1, 2}, 0o644))
	if _, err := SourceID(plain); err == nil {
		t.Error("a file too short for a header has an id")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var key = Key{Model: "pi05", Source: "sha256:00", Precision: "bf16", Layout: "0123456789abcdef"}

func TestStoreThenLoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	data := payload(3*chunkBytes/2 + 4097) // two chunks, the last partial
	if m, why, err := Load(ctx, dir, key, quiet()); m != nil || err != nil || !strings.Contains(why, "no packed weights") {
		t.Fatalf("empty cache: %v %q %v", m, why, err)
	}
	must(t, Store(ctx, dir, key, data, quiet()))
	m, why, err := Load(ctx, dir, key, quiet())
	if err != nil || m == nil {
		t.Fatalf("load: %q %v", why, err)
	}
	if !bytes.Equal(m.Data, data) {
		t.Fatal("the mapped payload differs from what was stored")
	}
	if uintptrOf(m.Data)%pageBytes != 0 {
		t.Error("the payload is not page aligned")
	}
	must(t, m.Close())

	other := key
	other.Layout = "fedcba9876543210"
	if m, why, _ := Load(ctx, dir, other, quiet()); m != nil || !strings.Contains(why, "no packed weights") {
		t.Errorf("another layout finds %v (%q)", m, why)
	}
	// storing another key of the family replaces the older file
	must(t, Store(ctx, dir, other, data[:100], quiet()))
	if _, err := os.Stat(filepath.Join(dir, key.FileName())); !os.IsNotExist(err) {
		t.Error("the older file of the same model and precision was kept")
	}
	rf := Key{Model: "rfdetr", Source: "x", Precision: "fp32", Layout: "1"}
	must(t, Store(ctx, dir, rf, data[:10], quiet()))
	if _, err := os.Stat(filepath.Join(dir, other.FileName())); err != nil {
		t.Error("storing another model removed pi05's file")
	}
}

// Open finds the packed form a server wants by its checkpoint's identity and hands the mapping to
// the server's constructor; a miss logs why and gives the key to store under, and a constructor
// that refuses the mapping gets an error naming the file.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "model.safetensors")
	writeSafetensors(t, ckpt, "w")
	w := Wanted{Model: "rfdetr", What: "rf-detr", Checkpoint: ckpt, Precision: "fp32", Layout: 0xabc}
	size := func(m *Mapped) (int, error) { return len(m.Data), nil }
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	key, n, err := Open(ctx, dir, w, log, size)
	if err != nil || n != 0 || key.Layout != "0000000000000abc" || key.Model != "rfdetr" || !strings.HasPrefix(key.Source, "file:") {
		t.Fatalf("empty cache: key %+v, %d, %v", key, n, err)
	}
	if !strings.Contains(logs.String(), "rf-detr packing the checkpoint") {
		t.Errorf("a miss is not logged:\n%s", logs.String())
	}
	must(t, Store(ctx, dir, key, payload(5000), quiet()))
	if again, n, err := Open(ctx, dir, w, log, size); err != nil || n != 5000 || again != key {
		t.Errorf("after the store: key %+v, %d bytes, %v; want %+v and 5000", again, n, err, key)
	}
	refuse := func(*Mapped) (int, error) { return 0, errors.New("layout mismatch") }
	if _, _, err := Open(ctx, dir, w, log, refuse); err == nil || !strings.Contains(err.Error(), key.FileName()) ||
		!strings.Contains(err.Error(), "layout mismatch") {
		t.Errorf("a refused mapping: %v", err)
	}
	w.Checkpoint = filepath.Join(dir, "missing.safetensors")
	if _, _, err := Open(ctx, dir, w, log, size); err == nil {
		t.Error("a missing checkpoint has packed weights")
	}
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func TestLoadRejectsDamagedFiles(t *testing.T) {
	ctx := context.Background()
	data := payload(chunkBytes + 10)
	for _, c := range []struct {
		name   string
		damage func(path string)
		why    string
	}{
		{"flipped payload byte", func(p string) { flip(t, p, -5) }, "CRC-32C"},
		{"truncated", func(p string) { must(t, os.Truncate(p, 8192)) }, "bytes on disk"},
		{"not ours", func(p string) { flip(t, p, 0) }, "magic"},
		{"another key in the header", func(p string) { rewriteKey(t, p) }, "written for"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			must(t, Store(ctx, dir, key, data, quiet()))
			path := filepath.Join(dir, key.FileName())
			c.damage(path)
			m, why, err := Load(ctx, dir, key, quiet())
			if m != nil || err != nil || !strings.Contains(why, c.why) {
				t.Fatalf("got %v %q %v, want a miss naming %q", m, why, err, c.why)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Error("the damaged file was kept")
			}
		})
	}
}

func flip(t *testing.T, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	if at < 0 {
		st, _ := f.Stat()
		at += st.Size()
	}
	b := []byte{0}
	_, err = f.ReadAt(b, at)
	must(t, err)
	b[0] ^= 0x5a
	_, err = f.WriteAt(b, at)
	must(t, err)
}

// rewriteKey replaces the precision in the header with one of the same length.
func rewriteKey(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	i := bytes.Index(b[:4096], []byte(`"precision":"bf16"`))
	if i < 0 {
		t.Fatal("no precision in the header")
	}
	copy(b[i:], `"precision":"fp16"`)
	must(t, os.WriteFile(path, b, 0o644))
}

func TestStoreRemovesAbandonedTemporaries(t *testing.T) {
	dir := t.TempDir()
	abandoned := filepath.Join(dir, "."+key.FileName()+tmpMark+"1")
	must(t, os.WriteFile(abandoned, []byte("partial"), 0o644))
	held := filepath.Join(dir, ".x-bf16-1"+suffix+tmpMark+"2")
	must(t, os.WriteFile(held, []byte("being written"), 0o644))
	f, err := os.Open(held)
	must(t, err)
	defer f.Close()
	must(t, unix.Flock(int(f.Fd()), unix.LOCK_EX))
	must(t, Store(context.Background(), dir, key, payload(10), quiet()))
	if _, err := os.Stat(abandoned); !os.IsNotExist(err) {
		t.Error("an abandoned temporary file was kept")
	}
	if _, err := os.Stat(held); err != nil {
		t.Error("a temporary file another writer holds was removed")
	}
}

func TestStoreCancelledLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Store(ctx, dir, key, payload(3*chunkBytes), quiet()); err == nil {
		t.Fatal("a cancelled store succeeded")
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		t.Errorf("a cancelled store left %v", left)
	}
}
