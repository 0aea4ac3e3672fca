package native

// pi05SourcesSHA256 is the SHA-256 of the C sources of kernels/pi05, which cgo compiles through
// pi05_unity.c. Go's build cache keys a cgo package on the files of its own folder only, so an edit
// to kernels/pi05 alone would silently reuse the old object file; keeping the hash here makes every
// kernel edit an edit of this package. TestPi05SourcesHash checks it and names the new value;
// `PI05_UPDATE_SRCHASH=1 go test ./native -run TestPi05SourcesHash` rewrites this file.
const pi05SourcesSHA256 = "62b36bdc80dcbbdf7140d945690ce733b32042fa16bc8bee640aa4e658b9d1af"
