package builder

import (
	"bufio"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// modulePath is this tool's Go module; a checkout of it can build both binaries.
const modulePath = "github.com/ttmodel/tt-model"

// Image paths of the two binaries.
const (
	ImageToolPath   = "/usr/local/bin/tt-model"
	ImageServerPath = "/usr/local/bin/tt-model-server"
)

// binary is one executable that goes into the image.
type binary struct {
	HostPath string
	// From says how it was chosen, in words that name no host path: it is
	// written into the image's history and labels, which must not change
	// with where the checkout lives.
	From string
}

// fromSource is the From of a binary built from this module.
const fromSource = "built from source"

// binaryPlan says where the builder may find or make the two binaries.
type binaryPlan struct {
	// ServerPath is runtime.server ("" when unset), already made absolute.
	ServerPath string
	// Executable is the running tt-model ("" when unknown). A binary that is
	// not named tt-model (a test binary, say) is never put in an image.
	Executable string
	// SearchDirs are where to look upward for this module's go.mod.
	SearchDirs []string
	// BuildDir receives binaries built from source.
	BuildDir string
	Log      io.Writer
}

// locateBinaries picks tt-model-server and tt-model: runtime.server, else
// the tt-model-server installed beside the running tt-model, else both
// built from this module's source. A user who installed the two binaries
// can package without the source; a developer gets a fresh build.
func locateBinaries(ctx context.Context, plan binaryPlan) (server, tool binary, err error) {
	exeIsTool := plan.Executable != "" && filepath.Base(plan.Executable) == "tt-model"
	switch {
	case plan.ServerPath != "":
		server = binary{HostPath: plan.ServerPath, From: "runtime.server"}
	case exeIsTool && isFile(filepath.Join(filepath.Dir(plan.Executable), "tt-model-server")):
		server = binary{HostPath: filepath.Join(filepath.Dir(plan.Executable), "tt-model-server"), From: "installed beside tt-model"}
	}
	// A server built from source gets a tool built from the same source, so
	// the image holds one commit's pair and stays reproducible; an installed
	// server goes with the running tt-model.
	if exeIsTool && server.HostPath != "" {
		tool = binary{HostPath: plan.Executable, From: "the running tt-model"}
	}
	if server.HostPath == "" || tool.HostPath == "" {
		root, err := findModuleRoot(plan.SearchDirs)
		if err != nil {
			what := "tt-model-server"
			if server.HostPath != "" {
				what = "tt-model"
			}
			return binary{}, binary{}, fmt.Errorf("no %s binary to put in the image (set runtime.server, install tt-model-server beside tt-model, or package from a checkout of %s): %w", what, modulePath, err)
		}
		if server.HostPath == "" {
			p, err := goBuild(ctx, root, "./cmd/tt-model-server", true, "", plan.BuildDir, plan.Log)
			if err != nil {
				return binary{}, binary{}, err
			}
			server = binary{HostPath: p, From: fromSource}
		}
		if tool.HostPath == "" {
			p, err := goBuild(ctx, root, "./cmd/tt-model", false, "", plan.BuildDir, plan.Log)
			if err != nil {
				return binary{}, binary{}, err
			}
			tool = binary{HostPath: p, From: fromSource}
		}
	}
	for _, b := range []struct {
		bin  binary
		what string
	}{{server, "tt-model-server"}, {tool, "tt-model"}} {
		if err := checkLinuxAMD64(b.bin.HostPath); err != nil {
			return binary{}, binary{}, fmt.Errorf("%s (%s): %w", b.what, b.bin.From, err)
		}
	}
	return server, tool, nil
}

func isFile(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.Mode().IsRegular()
}

// checkLinuxAMD64 refuses what the image could not run.
func checkLinuxAMD64(p string) error {
	info, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	f, err := elf.Open(p)
	if err != nil {
		return fmt.Errorf("%s is not an ELF executable: %w", p, err)
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 {
		return fmt.Errorf("%s is %v %v; the image is linux/amd64", p, f.Class, f.Machine)
	}
	return nil
}

// findModuleRoot walks up from each dir to the go.mod of this module.
func findModuleRoot(dirs []string) (string, error) {
	seen := map[string]bool{}
	var searched []string
	for _, start := range dirs {
		if start == "" || seen[start] {
			continue
		}
		seen[start] = true
		searched = append(searched, start)
		dir, err := filepath.Abs(start)
		if err != nil {
			continue
		}
		for {
			if modOf(filepath.Join(dir, "go.mod")) == modulePath {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("no go.mod of module %s above %s", modulePath, strings.Join(searched, ", "))
}

func modOf(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// goBuild builds pkg of the module at root for linux/amd64, reproducibly:
// -trimpath drops host paths and -buildid= fixes the build id, so equal
// sources give equal binaries (and so equal layers).
func goBuild(ctx context.Context, root, pkg string, cgo bool, ldflags, outDir string, log io.Writer) (string, error) {
	out := filepath.Join(outDir, filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", strings.TrimSpace("-ldflags=-buildid= "+ldflags), "-o", out, pkg)
	cmd.Dir = root
	cgoFlag := "CGO_ENABLED=0"
	if cgo {
		cgoFlag = "CGO_ENABLED=1"
	}
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", cgoFlag)
	cmd.Stdout = log
	cmd.Stderr = log
	fmt.Fprintf(log, "building %s of %s (go build -trimpath, linux/amd64, %s)\n", pkg, root, cgoFlag)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s in %s: %w", pkg, root, err)
	}
	return out, nil
}

// locateTool picks the tt-model a Python kind's image runs as its
// supervisor (PID 1): the running tt-model when it is statically linked,
// else one built from this module's source with CGO_ENABLED=0. A dynamic
// binary is never used: its libraries would replace the base's.
func locateTool(ctx context.Context, plan binaryPlan) (binary, error) {
	exe := plan.Executable
	why := "the running program is not tt-model"
	if exe != "" && filepath.Base(exe) == "tt-model" {
		static, err := isStaticELF(exe)
		if err != nil {
			return binary{}, fmt.Errorf("tt-model (%s): %w", exe, err)
		}
		if static {
			return binary{HostPath: exe, From: "the running tt-model"}, nil
		}
		why = "the running tt-model is dynamically linked"
	}
	root, err := findModuleRoot(plan.SearchDirs)
	if err != nil {
		return binary{}, fmt.Errorf("the image runs tt-model as its supervisor and needs it statically linked: %s, and there is no source to build one (%w); build tt-model with CGO_ENABLED=0 or package from a checkout of %s", why, err, modulePath)
	}
	p, err := goBuild(ctx, root, "./cmd/tt-model", false, "", plan.BuildDir, plan.Log)
	if err != nil {
		return binary{}, err
	}
	if err := checkLinuxAMD64(p); err != nil {
		return binary{}, err
	}
	return binary{HostPath: p, From: fromSource}, nil
}

// isStaticELF says whether an executable needs no program interpreter.
func isStaticELF(p string) (bool, error) {
	if err := checkLinuxAMD64(p); err != nil {
		return false, err
	}
	f, err := elf.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}
