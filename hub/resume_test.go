package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/hub/hubtest"
)

// TestDownloadChildProcess is the downloader that TestKilledDownloadResumes
// runs as a separate process (this test binary re-executed) and kills.
func TestDownloadChildProcess(t *testing.T) {
	if os.Getenv("TT_HUB_TEST_CHILD") != "1" {
		t.Skip("runs only as the child of TestKilledDownloadResumes")
	}
	cfg, err := ConfigFromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewClient(cfg).Download(context.Background(), Request{Repo: testRepo, Revision: os.Getenv("TT_HUB_TEST_REV")}, os.Stderr)
	t.Fatalf("the download was meant to be killed, it returned: %v", err)
}

func TestKilledDownloadResumes(t *testing.T) {
	srv := hubtest.New()
	defer srv.Close()
	big := randomBytes(4<<20, 9)
	commit := srv.AddCommit(testRepo, "main", []hubtest.File{
		{Path: "config.json", Data: []byte(`{}`)},
		{Path: "model.safetensors", Data: big, LFS: true},
	})
	const stall = 1 << 20
	srv.StallAfter(stall)
	cache := t.TempDir()
	sum := hubtest.SHA256(big)
	incomplete := filepath.Join(cache, "models--org--model", "blobs", sum+".incomplete")

	child := exec.Command(os.Args[0], "-test.run=^TestDownloadChildProcess$", "-test.v")
	child.Env = append(os.Environ(), "TT_HUB_TEST_CHILD=1", "TT_HUB_TEST_REV="+commit,
		"HF_ENDPOINT="+srv.URL, "HF_HUB_CACHE="+cache, "HF_TOKEN=", "HF_HUB_OFFLINE=")
	child.Stdout, child.Stderr = io.Discard, io.Discard
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the child to have the stalled prefix on disk. The deadline only
	// keeps a broken child from hanging the suite; it asserts nothing.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if fi, err := os.Stat(incomplete); err == nil && fi.Size() == stall {
			break
		}
		if time.Now().After(deadline) {
			child.Process.Kill()
			child.Wait()
			t.Fatal("the child never wrote the first MiB")
		}
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := child.Wait(); err == nil || child.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die by SIGKILL: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache, "models--org--model", "blobs", sum)); err == nil {
		t.Fatal("a blob exists for a killed download")
	}

	wantFetched := int64(len(big) - stall)
	if _, err := os.Stat(filepath.Join(cache, "models--org--model", "blobs", hubtest.GitBlobID([]byte(`{}`)))); err != nil {
		wantFetched += 2 // the child had not finished config.json either
	}
	srv.StallAfter(0)
	cfg := Config{Endpoint: srv.URL, CacheDir: cache}
	snap, err := NewClient(cfg).Download(context.Background(), Request{Repo: testRepo, Revision: commit}, io.Discard)
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if snap.Fetched != wantFetched {
		t.Errorf("Fetched = %d bytes, want %d (the file less the resumed prefix)", snap.Fetched, wantFetched)
	}
	var ranges []string
	for _, r := range srv.Requests() {
		if r.Host == "storage" && strings.HasSuffix(r.Path, "/"+sum) {
			ranges = append(ranges, r.Range)
		}
	}
	if want := fmt.Sprintf("bytes=%d-", stall); len(ranges) != 2 || ranges[0] != "" || ranges[1] != want {
		t.Errorf("CDN requests' Range = %q, want [\"\" %q]", ranges, want)
	}
	got, err := os.ReadFile(filepath.Join(snap.Dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if h := sha256.Sum256(got); hex.EncodeToString(h[:]) != sum {
		t.Errorf("resumed file has sha256 %x, want %s", h, sum)
	}
}
