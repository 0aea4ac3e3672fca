package native

// pi05SourcesSHA256 is the SHA-256 of the C sources of kernels/pi05, which cgo compiles through
// pi05_unity.c. Go's build cache keys a cgo package on the files of its own folder only, so an edit
// to kernels/pi05 alone would silently reuse the old object file; keeping the hash here makes every
// kernel edit an edit of this package. TestPi05SourcesHash checks it and names the new value;
// `PI05_UPDATE_SRCHASH=1 go test ./native -run TestPi05SourcesHash` rewrites this file.
const pi05SourcesSHA256 = "2367da4bf4f94ef52ef53d8d4a33b897a9e422f5a2d08a3918ae76dddcf58c7a"
