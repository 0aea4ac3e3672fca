package builder

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// git runs git -C dir args and returns its trimmed stdout, or ok=false when
// git fails (not a checkout, no such ref, no git at all).
func git(ctx context.Context, dir string, args ...string) (string, bool) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return "", false
	}
	return strings.TrimSpace(out.String()), true
}

// commitTime is the committer time of HEAD in the checkout holding dir.
func commitTime(ctx context.Context, dir string) (time.Time, bool) {
	s, ok := git(ctx, dir, "log", "-1", "--format=%ct", "HEAD")
	if !ok || s == "" {
		return time.Time{}, false
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(sec, 0).UTC(), true
}

// treePin is the provenance of a source tree, the wire manifest's
// built.tt_metal block. Fields git cannot answer stay nil.
type treePin struct {
	SHA        *string `json:"sha"`
	Describe   *string `json:"describe"`
	Dirty      bool    `json:"dirty"`
	SCMVersion string  `json:"scm_version"`
	Mode       string  `json:"mode"` // "local" or "git"
	Remote     *string `json:"remote"`
	Branch     *string `json:"branch"`
	Pushed     *bool   `json:"pushed"`
}

// asMap is the pin as the wire manifest's built.tt_metal: plain values, with
// nil (JSON null) for what git could not answer.
func (p treePin) asMap() map[string]any {
	orNil := func(s *string) any {
		if s == nil {
			return nil
		}
		return *s
	}
	var pushed any
	if p.Pushed != nil {
		pushed = *p.Pushed
	}
	return map[string]any{
		"sha": orNil(p.SHA), "describe": orNil(p.Describe), "dirty": p.Dirty, "scm_version": p.SCMVersion,
		"mode": p.Mode, "remote": orNil(p.Remote), "branch": orNil(p.Branch), "pushed": pushed,
	}
}

func strPtr(s string, ok bool) *string {
	if !ok || s == "" {
		return nil
	}
	return &s
}

// pinTree records where a local tree came from, as upstream's
// resolve_metal_source does: HEAD, tt-metal's own describe, dirtiness, the
// remote that holds HEAD (tracking remote first), the branch, and whether
// any remote branch contains HEAD.
func pinTree(ctx context.Context, dir, mode string) treePin {
	p := treePin{Mode: mode, SCMVersion: "0.0.0.dev0"}
	sha, ok := git(ctx, dir, "rev-parse", "HEAD")
	if !ok {
		return p
	}
	p.SHA = &sha
	p.Describe = strPtr(git(ctx, dir, "describe", "--abbrev=10", "--first-parent", "--dirty=-dirty"))
	status, _ := git(ctx, dir, "status", "--porcelain")
	p.Dirty = status != ""
	p.SCMVersion = scmVersion(ctx, dir)
	branch, ok := git(ctx, dir, "rev-parse", "--abbrev-ref", "HEAD")
	p.Branch = strPtr(branch, ok)
	onRemote, _ := git(ctx, dir, "branch", "-r", "--contains", "HEAD")
	pushed := onRemote != ""
	p.Pushed = &pushed
	p.Remote = remoteHoldingHead(ctx, dir, branch, onRemote)
	return p
}

// remoteHoldingHead prefers the branch's tracking remote when it holds
// HEAD, then any remote that holds it, then origin, then any remote.
func remoteHoldingHead(ctx context.Context, dir, branch, remoteRefs string) *string {
	list, _ := git(ctx, dir, "remote")
	remotes := strings.Fields(list)
	if len(remotes) == 0 {
		return nil
	}
	holds := func(r string) bool {
		for _, line := range strings.Split(remoteRefs, "\n") {
			ref := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "* "))
			if i := strings.Index(ref, " -> "); i >= 0 {
				ref = ref[:i]
			}
			if strings.HasPrefix(ref, r+"/") {
				return true
			}
		}
		return false
	}
	var order []string
	if branch != "" && branch != "HEAD" {
		if t, ok := git(ctx, dir, "config", "--get", "branch."+branch+".remote"); ok && holds(t) {
			order = append(order, t)
		}
	}
	for _, r := range remotes {
		if holds(r) {
			order = append(order, r)
		}
	}
	order = append(order, "origin")
	order = append(order, remotes...)
	for _, r := range order {
		if url, ok := git(ctx, dir, "remote", "get-url", r); ok {
			return &url
		}
	}
	return nil
}

var releaseDescribeRE = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)-(\d+)-g([0-9a-f]+)(-dirty)?$`)

// scmVersion approximates setuptools-scm over release tags, as upstream does.
func scmVersion(ctx context.Context, dir string) string {
	desc, ok := git(ctx, dir, "describe", "--tags", "--long", "--dirty", "--match", "v[0-9]*.[0-9]*.[0-9]*",
		"--exclude", "*-dev*", "--exclude", "*-rc*")
	m := releaseDescribeRE.FindStringSubmatch(desc)
	if !ok || m == nil {
		return "0.0.0.dev0"
	}
	v := fmt.Sprintf("%s.%s.%s", m[1], m[2], m[3])
	if m[4] != "0" {
		patch, _ := strconv.Atoi(m[3])
		v = fmt.Sprintf("%s.%s.%d.dev%s", m[1], m[2], patch+1, m[4])
	}
	if m[6] != "" {
		v += "+g" + m[5]
	}
	return v
}
