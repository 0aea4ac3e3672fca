// Command localhub runs the local Hugging Face Hub of the tests (hub/hubtest)
// on fixed loopback ports, for trying the author and operator loops
// (`tt-model push`, `tt-model serve org/name`) without huggingface.co, which
// the machines this project is built on cannot reach. It lives here, not in
// the tt-model binary, so the shipped CLI carries no stand-in Hub.
//
// Everything is held in memory: stopping it forgets every repo.
//
//	go run ./tools/localhub -weights Roboflow/rf-detr-base@7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a=/tmp/w
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ttmodel/tt-model/hub"
	"github.com/ttmodel/tt-model/hub/hubtest"
)

// weightsFlags collects -weights REPO@COMMIT=DIR.
type weightsFlags []string

func (w *weightsFlags) String() string     { return strings.Join(*w, ",") }
func (w *weightsFlags) Set(v string) error { *w = append(*w, v); return nil }

func main() {
	addr := flag.String("addr", "127.0.0.1:8787", "the Hub's address (HF_ENDPOINT)")
	storage := flag.String("storage-addr", "127.0.0.1:8788", "the LFS storage server's address")
	token := flag.String("token", "dev-token", "the write token the Hub accepts")
	user := flag.String("user", "dev", "the token's user")
	orgs := flag.String("orgs", "ttmodel", "comma-separated namespaces the token may also write to")
	var weights weightsFlags
	flag.Var(&weights, "weights", "REPO@COMMIT=DIR: serve the files of DIR as that commit of REPO (repeatable)")
	flag.Parse()
	if !strings.HasPrefix(*addr, "127.") && !strings.HasPrefix(*addr, "localhost:") && !strings.HasPrefix(*addr, "[::1]:") {
		log.Fatalf("-addr %s: this Hub is for loopback only", *addr)
	}
	srv, err := hubtest.NewOn(*addr, *storage)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	var orgList []string
	if *orgs != "" {
		orgList = strings.Split(*orgs, ",")
	}
	srv.AddToken(*token, hubtest.Token{User: *user, Orgs: orgList, Write: true, Name: "localhub"})
	for _, w := range weights {
		if err := seed(srv, w); err != nil {
			log.Fatalf("-weights %s: %v", w, err)
		}
	}
	fmt.Printf("local Hub on %s (storage %s); in another shell:\n  export HF_ENDPOINT=%s HF_TOKEN=%s\n", srv.URL, srv.Storage.URL, srv.URL, *token)
	fmt.Printf("token %s writes to %s; Ctrl-C stops it (repos are kept in memory only)\n", *token, strings.Join(append([]string{*user}, orgList...), ", "))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
}

// seed serves the files of a folder as commit COMMIT of REPO on main (hubtest.FilesOf).
func seed(srv *hubtest.Server, spec string) error {
	ref, dir, ok := strings.Cut(spec, "=")
	repo, commit, ok2 := strings.Cut(ref, "@")
	if !ok || !ok2 || !hub.IsCommit(commit) {
		return fmt.Errorf("want REPO@COMMIT=DIR with a 40-hex commit")
	}
	if err := hub.ValidateRepoID(repo); err != nil {
		return err
	}
	files, err := hubtest.FilesOf(dir)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%s has no files", dir)
	}
	srv.AddCommitAt(repo, "main", commit, files)
	fmt.Printf("serving %s@%s (%d files from %s)\n", repo, commit, len(files), dir)
	if what, ok := hub.TestWeightsIn(dir); ok {
		fmt.Printf("  %s; a cache that pulls them holds them marked as such\n", hub.TestWeightsNotice(repo, what))
	}
	return nil
}
