package native

// kernelSourcesSHA256 is the SHA-256 of the C sources of kernels/common,
// kernels/pi05 and kernels/rfdetr, which cgo compiles through the unity
// files of this folder. Go's build cache keys a cgo package on the files of its own
// folder only, so an edit to those kernels alone would silently reuse the old
// object files; keeping their hash here makes every kernel edit an edit of
// this package. TestKernelSourcesHash checks it;
// `TT_UPDATE_SRCHASH=1 go test ./native -run TestKernelSourcesHash` rewrites it.
const kernelSourcesSHA256 = "ea0bc6bde1846833eb04632b583c44ba15508db6a0d0e05a9f5209071cf0eaaa"
