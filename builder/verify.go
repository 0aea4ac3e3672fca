package builder

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/ttmodel/tt-model/builder/oci"
)

// runner runs a command inside the built image.
type runner interface {
	// Where names the place, for messages ("the Docker engine").
	Where() string
	// Run runs argv with env (KEY=VALUE) on top of the image's env.
	Run(ctx context.Context, argv, env []string, out io.Writer) (int, error)
	Close() error
}

// dockerRunner runs containers of the image loaded into an engine.
type dockerRunner struct {
	engine *dockerEngine
	tag    string
}

func (r dockerRunner) Where() string { return "a container on the Docker engine" }
func (r dockerRunner) Run(ctx context.Context, argv, env []string, out io.Writer) (int, error) {
	return r.engine.run(ctx, r.tag, argv, env, out)
}
func (r dockerRunner) Close() error { return r.engine.Close() }

// chrootRunner runs commands chrooted into the unpacked image as uid 1000,
// with the image's env: root uses chroot directly, anyone else a user
// namespace that maps their uid to 1000. No /proc, /dev or network: a verify
// step must not need them.
type chrootRunner struct {
	dir string
	env []string
	cwd string
}

func (r chrootRunner) Where() string { return "the unpacked image file system (chroot)" }

func (r chrootRunner) Run(ctx context.Context, argv, env []string, out io.Writer) (int, error) {
	// The later of two entries of one key wins: env over the image's.
	cmd := &exec.Cmd{Path: argv[0], Args: argv, Env: append(slices.Clip(r.env), env...), Dir: r.cwd, Stdout: out, Stderr: out}
	attr := &syscall.SysProcAttr{Chroot: r.dir, Credential: &syscall.Credential{Uid: ImageUID, Gid: ImageGID}}
	if os.Geteuid() != 0 {
		attr.Cloneflags = syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: ImageUID, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: ImageGID, HostID: os.Getegid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		attr.Credential.NoSetGroups = true
	}
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("start %v chrooted into %s: %w", argv, r.dir, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), nil
		}
		if err != nil {
			return -1, err
		}
		return 0, nil
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return -1, ctx.Err()
	}
}

func (r chrootRunner) Close() error { return os.RemoveAll(r.dir) }

// newChrootRunner unpacks img under scratch.
func newChrootRunner(img v1.Image, scratch string) (chrootRunner, error) {
	dir, err := os.MkdirTemp(scratch, "rootfs-")
	if err != nil {
		return chrootRunner{}, err
	}
	// The chroot's / must be searchable by uid 1000 (MkdirTemp makes 0700).
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return chrootRunner{}, err
	}
	if err := oci.UnpackRootfs(img, dir); err != nil {
		os.RemoveAll(dir)
		return chrootRunner{}, fmt.Errorf("unpack the image for verify: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		os.RemoveAll(dir)
		return chrootRunner{}, err
	}
	cwd := cf.Config.WorkingDir
	if cwd == "" {
		cwd = "/"
	}
	return chrootRunner{dir: dir, env: cf.Config.Env, cwd: cwd}, nil
}

// verifyStep is one command of the verify phase.
type verifyStep struct {
	What string // "tt-model-server --verify" or "verify[0]"
	Argv []string
}

// verifySteps is the server's own check, then the manifest's verify list.
// A statement runs under /bin/sh when the image has one; in a shell-less
// image (scratch) it is split into words, and shell syntax is refused with
// the reason rather than run wrongly.
func verifySteps(statements []string, tree *oci.Tree, pathEnv string) ([]verifyStep, error) {
	steps := []verifyStep{{What: "tt-model-server --verify", Argv: []string{ImageServerPath, "--verify"}}}
	hasShell := tree.IsFile("/bin/sh")
	for i, st := range statements {
		what := fmt.Sprintf("verify[%d] %q", i, st)
		if hasShell {
			steps = append(steps, verifyStep{What: what, Argv: []string{"/bin/sh", "-ceu", st}})
			continue
		}
		words, err := splitWords(st)
		if err != nil {
			return nil, fmt.Errorf("verify[%d]: %w (the image has no /bin/sh; base it on an image with a shell, or write a plain command)", i, err)
		}
		if len(words) == 0 {
			return nil, fmt.Errorf("verify[%d]: empty statement", i)
		}
		if !strings.Contains(words[0], "/") {
			found := ""
			for _, dir := range strings.Split(pathEnv, ":") {
				if tree.IsFile(path.Join(dir, words[0])) {
					found = path.Join(dir, words[0])
					break
				}
			}
			if found == "" {
				return nil, fmt.Errorf("verify[%d]: %s is not on the image's PATH (%s)", i, words[0], pathEnv)
			}
			words[0] = found
		}
		steps = append(steps, verifyStep{What: what, Argv: words})
	}
	return steps, nil
}

// splitWords splits a command line as a POSIX shell would for plain words
// with quotes and backslashes, and refuses what needs a real shell.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				} else if s[i] == '$' || s[i] == '`' {
					return nil, fmt.Errorf("%q needs a shell (expansion inside double quotes)", s)
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated \" quote")
			}
			inWord = true
		case c == '\\':
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
				inWord = true
			}
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case strings.IndexByte("|&;<>()$`*?[]{}", c) >= 0, !inWord && (c == '~' || c == '#'):
			return nil, fmt.Errorf("%q needs a shell (it uses %q)", s, c)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// runVerify runs every step with env on top of the image's and fails on
// the first non-zero exit, quoting the tail of its output.
func runVerify(ctx context.Context, r runner, steps []verifyStep, env []string, p *progress) error {
	for _, st := range steps {
		p.stage("verify: %s in %s", st.What, r.Where())
		var buf bytes.Buffer
		code, err := r.Run(ctx, st.Argv, env, io.MultiWriter(&buf, p.writer()))
		if err != nil {
			return fmt.Errorf("verify: %s: %w", st.What, err)
		}
		if code != 0 {
			return fmt.Errorf("verify: %s exited %d in %s:\n%s", st.What, code, r.Where(), tail(buf.String(), 2000))
		}
	}
	return nil
}

func tail(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// verifyImage runs the verify steps where the mode says, with env
// (KEY=VALUE) on top of the image's.
func verifyImage(ctx context.Context, mode string, img v1.Image, tree *oci.Tree, tag string, statements, env []string, scratch string, p *progress) (string, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	pathEnv := defaultPATH
	for _, kv := range cf.Config.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	steps, err := verifySteps(statements, tree, pathEnv)
	if err != nil {
		return "", err
	}
	r, err := openVerifyRunner(ctx, mode, img, tag, true, scratch, p)
	if err != nil {
		return "", err
	}
	defer r.Close()
	if err := runVerify(ctx, r, steps, env, p); err != nil {
		return "", err
	}
	return r.Where(), nil
}

// openVerifyRunner is where the image's checks run: a container on the
// Docker engine (mode docker, or auto when one answers), else the unpacked
// image in a chroot. load says whether img must first be loaded into the
// engine under tag (an engine build already has it).
func openVerifyRunner(ctx context.Context, mode string, img v1.Image, tag string, load bool, scratch string, p *progress) (runner, error) {
	if mode != VerifyAuto && mode != VerifyDocker && mode != VerifyRootfs {
		return nil, fmt.Errorf("verify mode %q: want %q, %q or empty", mode, VerifyDocker, VerifyRootfs)
	}
	if mode == VerifyAuto || mode == VerifyDocker {
		engine, err := connectDocker(ctx)
		switch {
		case err == nil:
			if load {
				p.stage("loading %s into the Docker engine", tag)
				if err := engine.load(ctx, tag, img); err != nil {
					engine.Close()
					return nil, err
				}
			}
			return dockerRunner{engine: engine, tag: tag}, nil
		case mode == VerifyDocker:
			return nil, fmt.Errorf("verify: %w", err)
		default:
			p.stage("no Docker engine (%v): verifying in the unpacked image", err)
		}
	}
	return newChrootRunner(img, scratch)
}
