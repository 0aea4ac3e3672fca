// Package templates holds the embedded text templates the tool renders: the
// model card, the systemd unit, scripts and Kubernetes manifests. Each
// template is one *.tmpl file in this folder; callers parse what they need
// from FS with text/template.
package templates

import "embed"

// FS holds every *.tmpl file of this folder.
//
//go:embed *.tmpl
var FS embed.FS
