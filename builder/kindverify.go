package builder

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/ttmodel/tt-model/builder/kind"
)

// markerRE finds the step markers xtrace prints (`+ : tt-model-verify 3`),
// also inside a build log's prefixed lines.
var markerRE = regexp.MustCompile(`(?m)^.*\+ : (tt-model-(?:step|verify)) (\d+)\s*$`)

// failedStep reads a failed script's output: the step the last marker
// opened (0 when it failed before the first) and the output from there on.
func failedStep(output, marker string) (int, string) {
	step, from := 0, 0
	for _, m := range markerRE.FindAllStringSubmatchIndex(output, -1) {
		if output[m[2]:m[3]] != marker {
			continue
		}
		n, err := strconv.Atoi(output[m[4]:m[5]])
		if err == nil {
			step, from = n, m[1]
		}
	}
	return step, strings.TrimLeft(output[from:], "\n")
}

// stepError names the failed step of a generated script and quotes what it
// printed.
func stepError(script string, steps []kind.Step, marker, output string, code int, where string) error {
	n, out := failedStep(output, marker)
	what := fmt.Sprintf("%s failed before its first step", script)
	if n >= 1 && n <= len(steps) {
		what = fmt.Sprintf("%s step %d of %d, %s", script, n, len(steps), steps[n-1].What)
	}
	exit := ""
	if code >= 0 {
		exit = fmt.Sprintf(" (exit %d)", code)
	}
	return fmt.Errorf("%s failed%s in %s:\n%s", what, exit, where, tail(out, 3000))
}

// runKindVerify runs verify.sh in the built image and, when a check fails,
// names it and quotes its output.
func runKindVerify(ctx context.Context, r runner, c *kindContext, p *progress) error {
	p.stage("verify: %d check(s) of verify.sh in %s", len(c.Verify), r.Where())
	var buf bytes.Buffer
	code, err := r.Run(ctx, []string{"/bin/bash", verifyImagePath}, nil, io.MultiWriter(&buf, p.writer()))
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if code != 0 {
		return fmt.Errorf("verify: %w", stepError("verify.sh", c.Verify, verifyMarker, buf.String(), code, r.Where()))
	}
	return nil
}
