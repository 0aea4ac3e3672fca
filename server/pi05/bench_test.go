package pi05

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ttmodel/tt-model/models/pi05"
)

// Per-request cost of each protocol on top of the model call, with the tiny checkpoint standing in
// for a fast model and three 224x224 camera frames per request (resized to its 56 px, in every path):
//
//	go test ./server -run '^$' -bench PI05Protocols -benchtime 50x
//
// "direct" calls the server's inference entry point with a decoded request; each protocol reports its
// p50 and the p50 of its time minus a direct call's made just before (ms; ~0 for "direct" itself).
// Run it on a quiet machine: docs/PERFORMANCE.md.
func BenchmarkPI05Protocols(b *testing.B) {
	ts, m := startPI05(b, map[string]string{"PI05_NUM_IMAGES": "3"})
	o := benchObservation()
	req := pi05.Request{Prompt: o.task, State: o.state, Noise: o.noise, NoiseRows: 10, NoiseCols: 32}
	for i := range o.frames {
		req.Images = append(req.Images, pi05.RGB{H: 224, W: 224, Pix: o.frames[i]})
	}
	direct := func() error {
		r := req
		if _, aerr := m.infer(context.Background(), time.Now(), "", &r, identityField, nil, nopRecorder{}); aerr != nil {
			return fmt.Errorf("%s", aerr.Detail)
		}
		return nil
	}
	for range 5 { // warm up the program, the slab and the connections' buffers
		if err := direct(); err != nil {
			b.Fatal(err)
		}
	}
	// Each iteration times the direct call and then the protocol's: the overhead is the median of
	// the paired differences, which a shared machine's drift disturbs far less than two medians.
	measure := func(b *testing.B, call func() error) {
		var times, over []float64
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			if err := direct(); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := call(); err != nil {
				b.Fatal(err)
			}
			d, p := t1.Sub(t0).Seconds()*1000, time.Since(t1).Seconds()*1000
			times, over = append(times, p), append(over, p-d)
		}
		b.StopTimer()
		b.ReportMetric(median(times), "p50-ms")
		b.ReportMetric(median(over), "overhead-p50-ms")
	}
	b.Run("direct", func(b *testing.B) { measure(b, direct) })
	url := ts.URL + "/v1/actions/generations"
	b.Run("json-http", func(b *testing.B) {
		body := []byte(o.jsonBody(""))
		measure(b, func() error { return postOK(b, url, body, "Content-Type", "application/json") })
	})
	b.Run("msgpack-http", func(b *testing.B) {
		body := o.msgpackEnvelope(b, nil)
		measure(b, func() error {
			return postOK(b, url, body, "Content-Type", "application/msgpack", "Accept", "application/msgpack")
		})
	})
	for _, ws := range []struct{ name, path string }{{"realtime-ws", "/v1/actions/realtime"}, {"openpi-ws", "/openpi/policy"}} {
		b.Run(ws.name, func(b *testing.B) {
			body := o.msgpackEnvelope(b, nil)
			if ws.name == "openpi-ws" {
				body = mustPack(b, o.bareObservation(b, nil))
			}
			conn := dialWS(b, ts.URL+ws.path)
			readMsgpackFrame(b, conn)
			measure(b, func() error {
				ctx := context.Background()
				if err := conn.Write(ctx, websocket.MessageBinary, body); err != nil {
					return err
				}
				_, _, err := conn.Read(ctx)
				return err
			})
		})
	}
}

// A prefix-cache hit against a miss on the tiny checkpoint (the full-width numbers come from
// tools/pi05bench): go test ./server -run '^$' -bench PI05PrefixCache
func BenchmarkPI05PrefixCache(b *testing.B) {
	ts, _ := startPI05(b, map[string]string{"PI05_PREFIX_CACHE_MB": "64"})
	o := newTestObservation(b)
	url := ts.URL + "/v1/actions/generations"
	b.Run("miss", func(b *testing.B) {
		for i := range b.N {
			o.task = "open drawer " + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) // a new prompt: a new prefix
			if err := postOK(b, url, o.msgpackEnvelope(b, nil), "Content-Type", "application/msgpack"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hit", func(b *testing.B) {
		body := o.msgpackEnvelope(b, nil)
		for range b.N {
			if err := postOK(b, url, body, "Content-Type", "application/msgpack"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchObservation has three 224x224 frames, the size robot cameras send.
func benchObservation() testObservation {
	o := testObservation{task: "pick up the block", state: []float32{0.1, -0.2, 0.3}}
	for i, n := range []string{"base", "left", "right"} {
		pix := make([]uint8, 224*224*3)
		for j := range pix {
			pix[j] = uint8(j*7 + i*31)
		}
		o.names, o.frames, o.h, o.w = append(o.names, n), append(o.frames, pix), append(o.h, 224), append(o.w, 224)
	}
	for i := range 10 * 32 {
		o.noise = append(o.noise, float32(i%5)/5)
	}
	return o
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}

type nopRecorder struct{}

func (nopRecorder) Stage(string, time.Duration) {}

func postOK(t testing.TB, url string, body []byte, header ...string) error {
	status, _, out := postBody(t, url, body, header...)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, out)
	}
	return nil
}

// Decoding alone (no model call, one core): a JSON and a msgpack body of three 224x224 frames.
//
//	go test ./server -run '^$' -bench PI05DecodeActions
func BenchmarkPI05DecodeActions(b *testing.B) {
	_, m := startPI05(b, map[string]string{"PI05_NUM_IMAGES": "3"})
	o := benchObservation()
	jsonBody, mpBody := []byte(o.jsonBody("")), o.msgpackEnvelope(b, nil)
	decodeJSON := func(b *testing.B, body []byte) {
		b.SetBytes(int64(len(body)))
		for range b.N {
			if _, aerr := m.decodeActionJSON(quoteNonFinite(body), false, nil); aerr != nil {
				b.Fatal(aerr.Detail)
			}
		}
	}
	b.Run("json", func(b *testing.B) { decodeJSON(b, jsonBody) })
	// The same-run peer: the same body with one key in another case, which the one-pass splitter
	// leaves to encoding/json (the path every JSON body took before it).
	b.Run("json-encoding-json", func(b *testing.B) {
		body := append([]byte(`{"Robot_ID":null,`), jsonBody[1:]...)
		if _, ok := splitGenerations(body); ok {
			b.Fatal("the peer body was split")
		}
		decodeJSON(b, body)
	})
	b.Run("msgpack", func(b *testing.B) {
		b.SetBytes(int64(len(mpBody)))
		for range b.N {
			if _, aerr := m.decodeActionMsgpack(mpBody, true, nil); aerr != nil {
				b.Fatal(aerr.Detail)
			}
		}
	})
}
