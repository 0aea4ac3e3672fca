package builder

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// BuildKit reports a build's progress through the engine's build API as
// "moby.buildkit.trace" messages: a base64 protobuf StatusResponse of
// moby/buildkit's api/services/control/control.proto. The fields read here
// (numbers from that file):
//
//	StatusResponse { repeated Vertex vertexes = 1; repeated VertexStatus statuses = 2;
//	                 repeated VertexLog logs = 3; repeated VertexWarning warnings = 4; }
//	Vertex         { string digest = 1; string name = 3; bool cached = 4;
//	                 Timestamp started = 5; Timestamp completed = 6; string error = 7; }
//	VertexLog      { string vertex = 1; int64 stream = 3; bytes msg = 4; }
//
// Decoded with protowire rather than buildkit's generated types: those come
// with buildkit's module and gRPC for five fields of three messages.

// traceVertex is one build step as BuildKit names it ("[4/9] RUN …").
type traceVertex struct {
	Digest    string
	Name      string
	Cached    bool
	Started   bool
	Completed bool
	Error     string
}

// traceLog is output of a step's process.
type traceLog struct {
	Vertex string
	Msg    []byte
}

type traceStatus struct {
	Vertexes []traceVertex
	Logs     []traceLog
}

// decodeTrace decodes a StatusResponse.
func decodeTrace(b []byte) (traceStatus, error) {
	var st traceStatus
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			vx, err := decodeVertex(v)
			if err != nil {
				return fmt.Errorf("vertex: %w", err)
			}
			st.Vertexes = append(st.Vertexes, vx)
		case num == 3 && typ == protowire.BytesType:
			var l traceLog
			err := eachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				switch {
				case num == 1 && typ == protowire.BytesType:
					l.Vertex = string(v)
				case num == 4 && typ == protowire.BytesType:
					l.Msg = append([]byte(nil), v...)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("log: %w", err)
			}
			st.Logs = append(st.Logs, l)
		}
		return nil
	})
	return st, err
}

// decodeVertex decodes one Vertex of a StatusResponse.
func decodeVertex(b []byte) (traceVertex, error) {
	var vx traceVertex
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			vx.Digest = string(v)
		case num == 3 && typ == protowire.BytesType:
			vx.Name = string(v)
		case num == 4 && typ == protowire.VarintType:
			n, _ := protowire.ConsumeVarint(v)
			vx.Cached = n != 0
		case num == 5 && typ == protowire.BytesType:
			vx.Started = true
		case num == 6 && typ == protowire.BytesType:
			vx.Completed = true
		case num == 7 && typ == protowire.BytesType:
			vx.Error = string(v)
		}
		return nil
	})
	return vx, err
}

// eachField calls f with every field of a message: bytes fields get their
// payload, varints their encoding; other wire types are skipped.
func eachField(b []byte, f func(protowire.Number, protowire.Type, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		switch typ {
		case protowire.BytesType:
			payload, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			v, n = payload, m
		case protowire.VarintType:
			_, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			v, n = b[:m], m
		default:
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			n = m
		}
		if v != nil || typ == protowire.BytesType {
			if err := f(num, typ, v); err != nil {
				return err
			}
		}
		b = b[n:]
	}
	return nil
}
