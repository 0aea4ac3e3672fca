package rfdetr

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/models/imagemem"
	"github.com/ttmodel/tt-model/models/imagemem/imagememtest"
	"github.com/ttmodel/tt-model/server"
)

// waitHeld polls /metrics until the request memory budget holds something: a request is past its
// decode and waiting for (or in) the model.
func waitHeld(t *testing.T, base string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); servertest.MetricValue(t, base, "tt_model_request_memory_bytes") == "0"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no request ever held memory")
		}
	}
}

// RF-DETR through Server.Run on a socket: a request holds its body and its decoded picture while it
// waits for the forward; another that does not fit beside it gets a 503 with Retry-After, one that
// could never fit a 413, and everything is given back once answered.
func TestRFDETRRequestMemoryBudget(t *testing.T) {
	pic := imagememtest.JPEG{Width: 600, Height: 600, Progressive: true}.Encode() // 5.4 MB to decode
	hd, _ := imagemem.ReadHeader(pic)
	budget := hd.DecodeBytes * 3 / 2
	base, _ := runRFDETR(t, &slowNetwork{delay: 2 * time.Second}, server.Options{RequestMemory: budget})
	body := fmt.Sprintf(`{"image": %q}`, base64.StdEncoding.EncodeToString(pic))

	first := make(chan int, 1)
	go func() {
		code, _ := servertest.Post(t, base+"/predict", body)
		first <- code
	}()
	waitHeld(t, base)
	resp, err := http.Post(base+"/predict", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("beside a held request: %d, Retry-After %q; want 503 with Retry-After 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if code := <-first; code != http.StatusOK {
		t.Errorf("the held request: %d", code)
	}

	big := imagememtest.JPEG{Width: 1000, Height: 1000, Progressive: true}.Encode() // 15 MB to decode
	code, answer := servertest.Post(t, base+"/predict", fmt.Sprintf(`{"image": %q}`, base64.StdEncoding.EncodeToString(big)))
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(answer, "more than the server's whole request memory budget") {
		t.Errorf("a request larger than the budget: %d %s", code, answer)
	}
	if held := servertest.MetricValue(t, base, "tt_model_request_memory_bytes"); held != "0" {
		t.Errorf("%s bytes still held after every answer", held)
	}
}
