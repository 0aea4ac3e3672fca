package native

// pi05SourcesSHA256 is the SHA-256 of the C sources of kernels/pi05, which cgo compiles through
// pi05_unity.c. Go's build cache keys a cgo package on the files of its own folder only, so an edit
// to kernels/pi05 alone would silently reuse the old object file; keeping the hash here makes every
// kernel edit an edit of this package. TestPi05SourcesHash checks it and names the new value;
// `PI05_UPDATE_SRCHASH=1 go test ./native -run TestPi05SourcesHash` rewrites this file.
const pi05SourcesSHA256 = "0d17ccfb5f4aa037110f6378b4e686b9fdb75df4fc58145c02c64da9cb4f9186"
