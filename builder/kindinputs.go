package builder

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ttmodel/tt-model/builder/kind"
	"github.com/ttmodel/tt-model/internal/fslink"
	"github.com/ttmodel/tt-model/manifest"
)

var (
	fullSHARE  = regexp.MustCompile(`^[0-9a-f]{40}$`)
	shortSHARE = regexp.MustCompile(`^[0-9a-f]{7,39}$`)
)

// resolveGitRef turns a ref on a remote into a commit sha, as upstream's
// resolve_git_ref: a full sha as is, else `git ls-remote` (the peeled tag
// when there is one), else a short sha trusted as written.
func resolveGitRef(ctx context.Context, repo, ref string) (string, error) {
	if fullSHARE.MatchString(ref) {
		return ref, nil
	}
	cmd := exec.CommandContext(ctx, "git", "ls-remote", repo, ref, ref+"^{}")
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); err == nil && lines[0] != "" {
		return strings.Fields(lines[len(lines)-1])[0], nil
	}
	if shortSHARE.MatchString(ref) {
		return ref, nil
	}
	why := strings.TrimSpace(stderr.String())
	if why == "" && err != nil {
		why = err.Error()
	}
	if why == "" {
		why = "no such ref"
	}
	return "", fmt.Errorf("could not resolve ref %q on %s to a commit (git ls-remote: %s)", ref, repo, why)
}

// kindInputs are the install inputs staged into ctx/, and what they pin.
type kindInputs struct {
	in kind.Input
	// record is what the wire manifest's built block says of vLLM and the
	// plugin ({sha, repo}, {sha, path, dirty} or {wheel}).
	record map[string]any
	// any says whether ctx/ received a file.
	any bool
}

// stageKindInputs pins every git ref under runtime (vllm, plugin) to a sha,
// and copies what install_engine.sh reads into dir: runtime.lock as
// requirements.lock, a local plugin or vLLM checkout (what git lists:
// tracked and untracked-but-not-ignored files), the vLLM wheel and the
// extra wheels.
func stageKindInputs(ctx context.Context, m *manifest.Manifest, workDir, dir string) (*kindInputs, error) {
	rt, err := deepCopy(m.Runtime)
	if err != nil {
		return nil, err
	}
	out := &kindInputs{in: kind.Input{M: m, Runtime: rt}, record: map[string]any{}}
	for _, key := range []string{"vllm", "plugin"} {
		entry, _ := rt[key].(map[string]any)
		if entry == nil {
			continue
		}
		switch {
		case stringOf(entry["repo"]) != "" && stringOf(entry["ref"]) != "":
			sha, err := resolveGitRef(ctx, stringOf(entry["repo"]), stringOf(entry["ref"]))
			if err != nil {
				return nil, fmt.Errorf("runtime.%s: %w", key, err)
			}
			entry["sha"] = sha
			out.record[key] = map[string]any{"sha": sha, "repo": entry["repo"]}
		case stringOf(entry["path"]) != "":
			src := absPath(workDir, expandHome(stringOf(entry["path"])))
			dest := filepath.Join(dir, map[string]string{"vllm": "vllm-src", "plugin": "plugin-src"}[key])
			if err := stageCheckout(ctx, src, dest); err != nil {
				return nil, fmt.Errorf("runtime.%s.path: %w", key, err)
			}
			sha, ok := git(ctx, src, "rev-parse", "HEAD")
			if !ok {
				sha = "unknown"
			}
			status, _ := git(ctx, src, "status", "--porcelain")
			entry["sha"], entry["dirty"] = sha, status != ""
			out.record[key] = map[string]any{"sha": sha, "path": src, "dirty": status != ""}
			out.any = true
		}
	}
	if vllm, _ := rt["vllm"].(map[string]any); vllm != nil && stringOf(vllm["wheel"]) != "" {
		name, err := stageVllmWheel(absPath(workDir, expandHome(stringOf(vllm["wheel"]))), filepath.Join(dir, "wheels"))
		if err != nil {
			return nil, err
		}
		vllm["wheel_name"] = name
		out.in.Wheels = append(out.in.Wheels, name)
		out.record["vllm"] = map[string]any{"wheel": name}
		out.any = true
	}
	extra, err := kind.StringList(rt["wheels"], "runtime.wheels")
	if err != nil {
		return nil, err
	}
	for _, w := range extra {
		src := absPath(workDir, expandHome(w))
		base := filepath.Base(src)
		if strings.HasPrefix(base, "vllm-") {
			return nil, fmt.Errorf("runtime.wheels: %s would be taken for the vLLM wheel; give it as runtime.vllm.wheel", base)
		}
		if err := copyInto(src, filepath.Join(dir, "wheels", base)); err != nil {
			return nil, fmt.Errorf("runtime.wheels: %w", err)
		}
		out.in.Wheels = append(out.in.Wheels, base)
		out.any = true
	}
	if lock := stringOf(rt["lock"]); lock != "" {
		src := filepath.Join(filepath.Dir(absPath(workDir, m.File)), lock)
		if err := copyInto(src, filepath.Join(dir, "requirements.lock")); err != nil {
			return nil, fmt.Errorf("runtime.lock: %w", err)
		}
		out.any = true
	}
	if !m.Source.TTMetal.IsGit() && m.Source.TTMetal.Path != "" {
		out.in.TorchPin = metalTorchPin(absPath(workDir, expandHome(m.Source.TTMetal.Path)))
	}
	return out, nil
}

// stageVllmWheel copies the wheel runtime.vllm.wheel names (a glob is
// allowed: wheel names carry version and platform) and returns its name.
func stageVllmWheel(pattern, dir string) (string, error) {
	found, err := filepath.Glob(pattern)
	if err != nil || len(found) == 0 {
		return "", fmt.Errorf("runtime.vllm.wheel: no wheel matches %s", pattern)
	}
	name := filepath.Base(found[0])
	if !strings.HasPrefix(name, "vllm-") || !strings.HasSuffix(name, ".whl") {
		return "", fmt.Errorf("runtime.vllm.wheel: %s is not a vLLM wheel (vllm-*.whl)", name)
	}
	if err := copyInto(found[0], filepath.Join(dir, name)); err != nil {
		return "", fmt.Errorf("runtime.vllm.wheel: %w", err)
	}
	return name, nil
}

// stageCheckout copies a local Python project (the plugin, a vLLM tree):
// what git lists as part of it (tracked files and untracked ones that are
// not ignored), or, outside git, everything but build detritus.
func stageCheckout(ctx context.Context, src, dest string) error {
	if !isFile(filepath.Join(src, "pyproject.toml")) && !isFile(filepath.Join(src, "setup.py")) {
		return fmt.Errorf("%s does not look like a Python package (no pyproject.toml or setup.py)", src)
	}
	listed, ok := git(ctx, src, "ls-files", "--cached", "--others", "--exclude-standard")
	if !ok {
		r, err := fslink.NewRoot(src)
		if err != nil {
			return err
		}
		s := &stager{dest: dest}
		if _, err := s.copy(r, ".", ""); err != nil {
			return err
		}
		_, err = s.checkLinks()
		return err
	}
	for _, rel := range strings.Split(listed, "\n") {
		if rel == "" || strings.HasSuffix(rel, ".pyc") || strings.Contains("/"+rel+"/", "/__pycache__/") {
			continue
		}
		p := filepath.Join(src, rel)
		info, err := os.Lstat(p)
		if err != nil || !info.Mode().IsRegular() { // deleted but still tracked, or a link
			continue
		}
		if err := copyFile(p, filepath.Join(dest, rel), info.Mode()); err != nil {
			return err
		}
	}
	return nil
}

func copyInto(src, dst string) error {
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a file", src)
	}
	return copyFile(src, dst, info.Mode())
}

// torchPinRE reads tt-metal's torch requirement, e.g.
// `torch==2.7.1 ; platform_machine == 'x86_64'`.
var torchPinRE = regexp.MustCompile(`^torch==([^\s;#]+)\s*(;.*platform_machine\s*==\s*'x86_64')?\s*$`)

// metalTorchPin is the torch version a local tt-metal tree declares in
// tt_metal/python_env/requirements-dev.txt, "" when it declares none.
func metalTorchPin(tree string) string {
	f, err := os.Open(filepath.Join(tree, "tt_metal", "python_env", "requirements-dev.txt"))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := torchPinRE.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
			return m[1]
		}
	}
	return ""
}

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}

// deepCopy copies a decoded YAML value, so pinning never changes the
// manifest the caller holds.
func deepCopy(m map[string]any) (map[string]any, error) {
	if m == nil {
		return map[string]any{}, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	err = json.Unmarshal(b, &out)
	return out, err
}
