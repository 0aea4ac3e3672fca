// Command hubbench measures `tt-model push` and `pull` of a staged package
// against the local Hub (hub/hubtest) on loopback, as MB/s of package bytes,
// beside `cp -r` of the same tree (the physical limit on one machine), and
// a second push with nothing changed (its time and the objects it sent).
// The Hub runs in this process, so client and server share the CPUs.
//
//	make bench-hub     (packages models/rf-detr into build/ first when needed)
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/ttmodel/tt-model/builder"
	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/hub/hubtest"
)

func main() {
	pkg := flag.String("package", "build/rf-detr", "a staged package folder")
	runs := flag.Int("runs", 3, "repetitions of each measurement (the median is reported)")
	flag.Parse()
	size, files, err := treeSize(*pkg)
	if err != nil {
		log.Fatalf("%s: %v (stage it first: tt-model package --container models/rf-detr/tt-model.yaml)", *pkg, err)
	}
	work, err := os.MkdirTemp("", "hubbench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(work)
	fmt.Printf("package %s: %d files, %.1f MiB\ncpu: %s, %d logical CPUs; load average at start: %s\n\n",
		*pkg, files, float64(size)/(1<<20), cpuName(), runtime.NumCPU(), loadAvg())

	var cp, push, again, pull []time.Duration
	var sentAgain int
	for i := 0; i < *runs; i++ {
		dst := filepath.Join(work, fmt.Sprintf("cp-%d", i))
		start := time.Now()
		if out, err := exec.Command("cp", "-r", *pkg, dst).CombinedOutput(); err != nil {
			log.Fatalf("cp -r: %v\n%s", err, out)
		}
		cp = append(cp, time.Since(start))

		p, a, n, l, err := roundTrip(*pkg, filepath.Join(work, fmt.Sprintf("hf-%d", i)), i)
		if err != nil {
			log.Fatal(err)
		}
		push, again, pull = append(push, p), append(again, a), append(pull, l)
		sentAgain += n
	}
	rate := func(d time.Duration) float64 { return float64(size) / (1 << 20) / d.Seconds() }
	cpM := median(cp)
	fmt.Println("| operation | median time | MiB/s | vs cp -r |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| cp -r (peer) | %s | %.0f | 1.00x |\n", cpM.Round(time.Millisecond), rate(cpM))
	for _, row := range []struct {
		name string
		d    time.Duration
	}{{"push (new repo)", median(push)}, {"pull (empty cache)", median(pull)}} {
		fmt.Printf("| %s | %s | %.0f | %.2fx |\n", row.name, row.d.Round(time.Millisecond), rate(row.d), rate(row.d)/rate(cpM))
	}
	fmt.Printf("| push again, nothing changed | %s | - | - |\n", median(again).Round(time.Millisecond))
	fmt.Printf("\nobjects sent by the unchanged pushes: %d (want 0)\n", sentAgain)
}

// roundTrip pushes pkg to a fresh local Hub, pushes it again, and pulls it
// into an empty cache; it returns the three times and the storage requests
// the second push made.
func roundTrip(pkg, cache string, i int) (push, again time.Duration, sentAgain int, pull time.Duration, err error) {
	srv := hubtest.New()
	defer srv.Close()
	srv.AddToken("t", hubtest.Token{User: "bench", Write: true})
	c := hub.NewClient(hub.Config{Endpoint: srv.URL, Token: "t", CacheDir: cache})
	repo := fmt.Sprintf("bench/pkg-%d", i)
	ctx := context.Background()
	start := time.Now()
	if _, err = builder.PushHub(ctx, pkg, builder.HubPushOptions{Client: c, Repo: repo, Log: io.Discard}); err != nil {
		return
	}
	push = time.Since(start)
	mark := len(srv.Requests())
	start = time.Now()
	if _, err = builder.PushHub(ctx, pkg, builder.HubPushOptions{Client: c, Repo: repo, Log: io.Discard}); err != nil {
		return
	}
	again = time.Since(start)
	for _, r := range srv.Requests()[mark:] {
		if r.Host == "storage" {
			sentAgain++
		}
	}
	start = time.Now()
	if _, err = c.Download(ctx, hub.Request{Repo: repo}, io.Discard); err != nil {
		return
	}
	pull = time.Since(start)
	return
}

func treeSize(dir string) (size int64, files int, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		size += fi.Size()
		files++
		return nil
	})
	return
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func cpuName() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
