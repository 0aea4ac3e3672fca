package native

// kernelSourcesSHA256 is the SHA-256 of the C sources of kernels/common,
// kernels/pi05 and kernels/rfdetr, which cgo compiles through the unity
// files of this folder. Go's build cache keys a cgo package on the files of its own
// folder only, so an edit to those kernels alone would silently reuse the old
// object files; keeping their hash here makes every kernel edit an edit of
// this package. TestKernelSourcesHash checks it;
// `TT_UPDATE_SRCHASH=1 go test ./native -run TestKernelSourcesHash` rewrites it.
const kernelSourcesSHA256 = "c215d19ad9d8c24d95b61933a7cbf96df7597001e27ab3aa6bc181dfbff73d1e"
