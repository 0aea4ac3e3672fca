package native

// kernelSourcesSHA256 is the SHA-256 of the C sources of kernels/common and
// kernels/rfdetr, which cgo compiles through common_unity.c and
// rfdetr_unity.c. Go's build cache keys a cgo package on the files of its own
// folder only, so an edit to those kernels alone would silently reuse the old
// object files; keeping their hash here makes every kernel edit an edit of
// this package. TestKernelSourcesHash checks it;
// `TT_UPDATE_SRCHASH=1 go test ./native -run TestKernelSourcesHash` rewrites it.
const kernelSourcesSHA256 = "96da23d0f1a607d62af81fe7398a0170b52085cb8bdff97aafa0b7f378661504"
