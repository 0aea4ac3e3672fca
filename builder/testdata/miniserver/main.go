// Command miniserver stands in for tt-model-server and tt-model in the
// builder's tests: a cgo (so dynamically linked) program that answers the
// two calls packaging makes of them. It is built by the tests only.
package main

/*
#cgo LDFLAGS: -lm
#include <math.h>
static double cuberoot(double x) { return cbrt(x); }
*/
import "C"

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: miniserver --version | --verify | --fail")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "--version":
		fmt.Printf("miniserver 1 (cbrt(%d)=%.3f)\n", len(os.Args)*4, float64(C.cuberoot(C.double(len(os.Args)*4))))
	case "--verify":
		// Report what the real --verify reports, as far as a fixture can:
		// the user it runs as and the env the image gave it.
		fmt.Printf("verify ok uid=%d HF_HOME=%s TT_MESH_SHAPE=%s\n", os.Getuid(), os.Getenv("HF_HOME"), os.Getenv("TT_MESH_SHAPE"))
	default:
		fmt.Fprintf(os.Stderr, "miniserver: unknown argument %q\n", os.Args[1])
		os.Exit(3)
	}
}
