package builder

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/ttmodel/tt-model/builtpkg"
	"github.com/ttmodel/tt-model/internal/ocilayout"
)

// PushOptions are the inputs of Push.
type PushOptions struct {
	// Registry is HOST[/NAMESPACE]; "" = the manifest's image.registry.
	Registry string
	Tags     []string // extra tags besides <digest[:12]>
	// Insecure allows plain HTTP (and unverified TLS) to the registry.
	Insecure bool
	Log      io.Writer // progress; nil = silent
}

// PushResult says where the image went.
type PushResult struct {
	Repository string   `json:"repository"`
	Digest     string   `json:"digest"`
	Tags       []string `json:"tags"`
}

// Reference is repo@digest, what a deployment pins.
func (r PushResult) Reference() string { return r.Repository + "@" + r.Digest }

// ociTag is the OCI distribution spec's tag grammar.
var ociTag = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)

// pushBackoff retries a failed registry request after 1, 2, 4, 8 s.
var pushBackoff = remote.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 5}

// Push uploads the image of a staged package to an OCI registry with the
// default keychain, tagged <digest[:12]> and every extra tag.
func Push(ctx context.Context, dir string, opts PushOptions) (PushResult, error) {
	for _, t := range opts.Tags {
		if !ociTag.MatchString(t) {
			return PushResult{}, fmt.Errorf("--tag %q: a tag is 1-128 of [A-Za-z0-9_.-], not starting with '.' or '-' (the OCI distribution grammar)", t)
		}
	}
	pkg, err := builtpkg.Read(dir)
	if err != nil {
		return PushResult{}, fmt.Errorf("%s is not a staged package: %w", dir, err)
	}
	if !pkg.IsContainer() {
		return PushResult{}, fmt.Errorf("%s: not a container (5.1) package", dir)
	}
	w := pkg.Wire
	layoutDir := pkg.ImageLayout()
	if layoutDir == "" {
		return PushResult{}, fmt.Errorf("%s: no OCI layout (image/oci-layout missing); run tt-model package first", dir)
	}
	registry := strings.TrimSuffix(opts.Registry, "/")
	if registry == "" {
		registry = w.Container.Image.Registry
	}
	if registry == "" || registry == "hf" {
		return PushResult{}, fmt.Errorf("%s: image.registry is %q (the image rides in the Hub repo); name an OCI registry with --registry HOST/NAMESPACE", dir, w.Container.Image.Registry)
	}
	repository := w.Container.Image.Repository
	if repository == "" {
		repository = w.Name
	}
	// Every blob must hold what its name says before the first byte leaves:
	// a tampered layer is refused here, not left to the registry to notice.
	if err := ocilayout.VerifyBlobs(layoutDir, nil); err != nil {
		return PushResult{}, fmt.Errorf("%s: %w; repackage", dir, err)
	}
	img, err := ocilayout.Image(layoutDir, pkg.Tag())
	if err != nil {
		return PushResult{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return PushResult{}, fmt.Errorf("digest of %s: %w", layoutDir, err)
	}
	if want := w.Container.Image.Digest; want != "" && want != digest.String() {
		return PushResult{}, fmt.Errorf("%s: the layout holds %s but %s records %s; repackage", dir, digest, builtpkg.WireFile, want)
	}
	var nameOpts []name.Option
	if opts.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	repo, err := name.NewRepository(registry+"/"+repository, nameOpts...)
	if err != nil {
		return PushResult{}, fmt.Errorf("registry %q: %w", registry, err)
	}
	tags := append([]string{shortHex(digest.Hex)}, opts.Tags...)
	refs := make([]name.Tag, 0, len(tags))
	for _, t := range tags {
		ref, err := name.NewTag(repo.String()+":"+t, nameOpts...)
		if err != nil {
			return PushResult{}, fmt.Errorf("tag %q: %w", t, err)
		}
		refs = append(refs, ref)
	}

	p := newProgress(opts.Log)
	ropts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithRetryBackoff(pushBackoff),
		remote.WithJobs(4),
	}
	if opts.Insecure {
		ropts = append(ropts, remote.WithTransport(insecureTransport()))
	}
	p.stage("pushing %s to %s", w.Container.Image.Tag, refs[0])
	updates := make(chan v1.Update, 64)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		reportPush(p, updates)
	}()
	err = remote.Write(refs[0], img, append(ropts, remote.WithProgress(updates))...)
	wg.Wait()
	if err != nil {
		return PushResult{}, fmt.Errorf("push %s: %w", refs[0], err)
	}
	for _, ref := range refs[1:] {
		p.stage("tagging %s", ref)
		if err := remote.Tag(ref, img, ropts...); err != nil {
			return PushResult{}, fmt.Errorf("tag %s: %w", ref, err)
		}
	}
	return PushResult{Repository: repo.String(), Digest: digest.String(), Tags: tags}, nil
}

// reportPush prints the bytes pushed at most once a second, and the end.
func reportPush(p *progress, updates <-chan v1.Update) {
	var last time.Time
	var u v1.Update
	for u = range updates {
		if u.Error != nil {
			continue
		}
		if time.Since(last) >= time.Second {
			p.stage("pushed %s of %s", humanBytes(u.Complete), humanBytes(u.Total))
			last = time.Now()
		}
	}
	if u.Total > 0 {
		p.stage("pushed %s of %s", humanBytes(u.Complete), humanBytes(u.Total))
	}
}
