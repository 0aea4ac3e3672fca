package rfdetr

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/models/imagemem/imagememtest"
	"github.com/ttmodel/tt-model/server"
	"github.com/ttmodel/tt-model/server/modeltest"
)

type panickyRFDETR struct {
	loadedRFDETR
	armed *atomic.Bool
}

func (m panickyRFDETR) Routes() []server.Route {
	return modeltest.Panicking(m.Model.Routes(), "decode", m.armed)
}

// RF-DETR's route too: a panic after the picture is decoded is a 500 and holds nothing after.
func TestPanickingRFDETRHandlerGivesMemoryBack(t *testing.T) {
	var armed atomic.Bool
	m := New(Options{Getenv: func(string) string { return "" }, Device: "cpu test", Version: "test"})
	m.log = servertest.DiscardLog()
	m.det = newDetectorForTest(&slowNetwork{})
	pic := imagememtest.JPEG{Width: 600, Height: 600, Progressive: true}.Encode()
	s := server.New(panickyRFDETR{loadedRFDETR{m}, &armed}, server.Options{Log: servertest.DiscardLog(), RequestMemory: 8 << 20})
	s.MarkLoaded()
	ctx, cancel := context.WithCancel(context.Background())
	base, done := servertest.Run(t, ctx, s.Run)
	t.Cleanup(func() { cancel(); <-done })
	body := fmt.Sprintf(`{"image": %q}`, base64.StdEncoding.EncodeToString(pic))
	armed.Store(true)
	if code, out := servertest.Post(t, base+"/predict", body); code != http.StatusInternalServerError || !strings.Contains(out, "handler panics at decode") {
		t.Errorf("a panicking request: %d %s", code, out)
	}
	servertest.WaitMetric(t, base, "tt_model_request_memory_bytes", 0)
	armed.Store(false)
	if code, out := servertest.Post(t, base+"/predict", body); code != http.StatusOK {
		t.Errorf("after the panic: %d %s", code, out)
	}
}
