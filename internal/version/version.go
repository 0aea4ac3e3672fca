// Package version holds the one version string of this source tree: tt-model
// and tt-model-server report it (--version, /info), and the builder records
// it in the manifests, image labels and model cards it writes. A server the
// builder compiles from a checkout carries that checkout's version.
package version

// Version is the release of this source tree.
const Version = "0.1.0"
