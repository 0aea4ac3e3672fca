package native

// kernelSourcesSHA256 is the SHA-256 of the C sources of kernels/common,
// kernels/pi05 and kernels/rfdetr, which cgo compiles through the unity
// files of this folder. Go's build cache keys a cgo package on the files of its own
// folder only, so an edit to those kernels alone would silently reuse the old
// object files; keeping their hash here makes every kernel edit an edit of
// this package. TestKernelSourcesHash checks it;
// `TT_UPDATE_SRCHASH=1 go test ./native -run TestKernelSourcesHash` rewrites it.
const kernelSourcesSHA256 = "b518802fad96d0995db5aa6bc7c643099196187e6429b1beded215fed6fa6bb2"
