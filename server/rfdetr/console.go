package rfdetr

import (
	"github.com/ttmodel/tt-model/server"
	"github.com/ttmodel/tt-model/server/api"
	"github.com/ttmodel/tt-model/server/console"
)

// Console is RF-DETR on the console: the weights' pin and the device, and a
// form that sends a picture and a threshold to POST /predict.
func (m *Model) Console() console.Model {
	m.mu.Lock()
	src := m.source
	m.mu.Unlock()
	facts := []console.Fact{{Label: "Weights", Value: server.Pin(m.repo(), src.Revision)}}
	if src.Dir != "" {
		facts = append(facts, console.Fact{Label: "Weights folder", Value: src.Dir + " (via " + src.Via + ")"})
	}
	if d := m.Device(); d != "" {
		facts = append(facts, console.Fact{Label: "Device", Value: d})
	}
	return console.Model{Kind: api.KindRFDETR, Facts: facts,
		RFDETR: &console.RFDETRForm{Threshold: defaultThreshold, MaxDetections: defaultMaxDetections, MaxBodyBytes: MaxBodyBytes}}
}
