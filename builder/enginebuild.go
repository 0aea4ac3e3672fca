package builder

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"

	"github.com/ttmodel/tt-model/builder/kind"
)

// engineBuild builds a context through the Docker engine's build API and
// tags the result: BuildKit (the engine's builder-next, which takes the
// context as a tar upload, no session needed), or the classic builder when
// the engine does not offer BuildKit. It returns the builder used. The build
// log streams to progress; a failed step is named, and when it is
// install_engine.sh, so is the install step and what it installs.
func engineBuild(ctx context.Context, c *client.Client, files contextFiles, mtime time.Time, tag, network string,
	install []kind.Step, p *progress) (string, error) {
	builders := []struct {
		version build.BuilderVersion
		name    string
	}{{build.BuilderBuildKit, "BuildKit"}, {build.BuilderV1, "classic builder"}}
	for i, b := range builders {
		err := runEngineBuild(ctx, c, files, mtime, tag, network, b.version, install, p)
		var refused *buildRefusedError
		if i == 0 && errors.As(err, &refused) && strings.Contains(strings.ToLower(refused.err.Error()), "buildkit") {
			p.stage("the engine does not offer BuildKit through its API (%v): using the classic builder", refused.err)
			continue
		}
		return b.name, err
	}
	return "", fmt.Errorf("no builder")
}

// buildRefusedError is the engine refusing a build request outright.
type buildRefusedError struct{ err error }

func (e *buildRefusedError) Error() string { return "docker build: " + e.err.Error() }

func runEngineBuild(ctx context.Context, c *client.Client, files contextFiles, mtime time.Time, tag, network string,
	version build.BuilderVersion, install []kind.Step, p *progress) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(files.writeTar(pw, mtime)) }()
	res, err := c.ImageBuild(ctx, pr, client.ImageBuildOptions{
		Tags: []string{tag}, Remove: true, ForceRemove: true, NetworkMode: network, Version: version,
	})
	if err != nil {
		pr.CloseWithError(err)
		return &buildRefusedError{err: err}
	}
	defer res.Body.Close()
	s := &buildStream{p: p, vertexes: map[string]*buildStep{}}
	dec := json.NewDecoder(res.Body)
	for {
		var msg buildMessage
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("docker build: read the engine's answer: %w", err)
		}
		if err := s.handle(msg); err != nil {
			return err
		}
	}
	return s.result(install)
}

// buildMessage is one JSON message of the build API's answer.
type buildMessage struct {
	Stream      string          `json:"stream"`
	Status      string          `json:"status"`
	ID          string          `json:"id"`
	Aux         json.RawMessage `json:"aux"`
	Error       string          `json:"error"`
	ErrorDetail struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// buildStep is one step of the build and the tail of its output.
type buildStep struct {
	name    string
	shown   bool
	err     string
	log     bytes.Buffer
	partial []byte
}

// maxStepLog bounds what is kept of one step's output for the error.
const maxStepLog = 1 << 20

func (st *buildStep) write(p *progress, b []byte) {
	st.log.Write(b)
	if st.log.Len() > maxStepLog {
		keep := st.log.Bytes()[st.log.Len()-maxStepLog/2:]
		st.log = *bytes.NewBuffer(append([]byte(nil), keep...))
	}
	st.partial = append(st.partial, b...)
	for {
		i := bytes.IndexByte(st.partial, '\n')
		if i < 0 {
			return
		}
		fmt.Fprintf(p.writer(), "    │ %s\n", bytes.TrimRight(st.partial[:i], "\r"))
		st.partial = st.partial[i+1:]
	}
}

// buildStream follows a build's messages: BuildKit's traces or the classic
// builder's text, printing each step as it starts and its output.
type buildStream struct {
	p        *progress
	vertexes map[string]*buildStep
	order    []string
	classic  *buildStep // the classic builder's current step
	errMsg   string
}

var classicStepRE = regexp.MustCompile(`^Step \d+/\d+ : (.*)`)

func (s *buildStream) handle(msg buildMessage) error {
	switch {
	case msg.ErrorDetail.Message != "" || msg.Error != "":
		s.errMsg = msg.ErrorDetail.Message
		if s.errMsg == "" {
			s.errMsg = msg.Error
		}
	case msg.ID == "moby.buildkit.trace" && len(msg.Aux) > 0:
		var enc string
		if err := json.Unmarshal(msg.Aux, &enc); err != nil {
			return fmt.Errorf("docker build: BuildKit trace: %w", err)
		}
		raw, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return fmt.Errorf("docker build: BuildKit trace: %w", err)
		}
		st, err := decodeTrace(raw)
		if err != nil {
			return fmt.Errorf("docker build: BuildKit trace: %w", err)
		}
		s.trace(st)
	case msg.Stream != "":
		s.classicText(msg.Stream)
	}
	return nil
}

func (s *buildStream) vertex(digest string) *buildStep {
	v := s.vertexes[digest]
	if v == nil {
		v = &buildStep{}
		s.vertexes[digest] = v
		s.order = append(s.order, digest)
	}
	return v
}

func (s *buildStream) trace(st traceStatus) {
	for _, vx := range st.Vertexes {
		v := s.vertex(vx.Digest)
		if vx.Name != "" {
			v.name = vx.Name
		}
		if !v.shown && (vx.Started || vx.Cached) {
			v.shown = true
			if vx.Cached {
				s.p.stage("build: CACHED %s", v.name)
			} else {
				s.p.stage("build: %s", v.name)
			}
		}
		if vx.Error != "" && v.err == "" {
			v.err = vx.Error
			s.p.stage("build: %s failed: %s", v.name, vx.Error)
		}
	}
	for _, l := range st.Logs {
		s.vertex(l.Vertex).write(s.p, l.Msg)
	}
}

func (s *buildStream) classicText(text string) {
	for _, line := range strings.SplitAfter(text, "\n") {
		if line == "" {
			continue
		}
		if m := classicStepRE.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			s.classic = &buildStep{name: m[0], shown: true}
			s.order = append(s.order, m[0])
			s.vertexes[m[0]] = s.classic
			s.p.stage("build: %s", m[0])
			continue
		}
		if s.classic != nil {
			s.classic.write(s.p, []byte(line))
		}
	}
}

// result turns the end of the stream into nil or an error naming the step.
func (s *buildStream) result(install []kind.Step) error {
	if s.errMsg == "" {
		return nil
	}
	var failed *buildStep
	for _, d := range s.order {
		if v := s.vertexes[d]; v.err != "" {
			failed = v
		}
	}
	if failed == nil {
		failed = s.classic
	}
	if failed == nil {
		return fmt.Errorf("docker build: %s", s.errMsg)
	}
	where := "the build step " + failed.name
	if strings.Contains(failed.name, "install_engine.sh") {
		return fmt.Errorf("docker build: %w", stepError("install_engine.sh", install, installMarker, failed.log.String(), -1, where))
	}
	return fmt.Errorf("docker build: %s failed: %s\n%s", where, s.errMsg, tail(failed.log.String(), 3000))
}
