package native

// kernelSourcesSHA256 is the SHA-256 of the C sources of kernels/common,
// kernels/pi05 and kernels/rfdetr, which cgo compiles through the unity
// files of this folder. Go's build cache keys a cgo package on the files of its own
// folder only, so an edit to those kernels alone would silently reuse the old
// object files; keeping their hash here makes every kernel edit an edit of
// this package. TestKernelSourcesHash checks it;
// `TT_UPDATE_SRCHASH=1 go test ./native -run TestKernelSourcesHash` rewrites it.
const kernelSourcesSHA256 = "78c32d4bd1c0806d5aa51296902ee15c09bc0c7c07423893c6511b70a19577fe"
