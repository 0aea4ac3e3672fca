package pi05

import (
	"fmt"
	"strings"

	"github.com/ttmodel/tt-model/internal/chips"
	"github.com/ttmodel/tt-model/models/pi05"
	"github.com/ttmodel/tt-model/models/pi05/serving"
	"github.com/ttmodel/tt-model/server"
	"github.com/ttmodel/tt-model/server/api"
	"github.com/ttmodel/tt-model/server/console"
)

// Console is pi0.5 on the console: the weights' pin, the device (ISA,
// precision, layout, devices and threads), each device's role and state, the
// presets, and a form that sends camera pictures, a prompt and a state to
// POST /v1/actions/generations.
func (m *Model) Console() console.Model {
	p, dir := m.current()
	facts := []console.Fact{{Label: "Weights", Value: server.Pin(m.srv.HFModel, m.revision())}}
	if dir != "" {
		facts = append(facts, console.Fact{Label: "Weights folder", Value: dir})
	}
	if d := m.Device(); d != "" {
		facts = append(facts, console.Fact{Label: "Device", Value: d})
	}
	if e := m.running(); e != nil {
		facts = append(facts, console.Fact{Label: "Devices", Value: deviceStates(e.Info().Devices)})
	}
	facts = append(facts, console.Fact{Label: "Presets", Value: fmt.Sprintf("%d cameras, horizon %d, %d denoising steps",
		m.srv.NumImages, m.srv.ActionHorizon, m.srv.NumSteps)})
	out := console.Model{Kind: api.KindPI05, Facts: facts}
	if p == nil {
		return out
	}
	cams := p.Config.Cameras()
	if len(cams) != m.srv.NumImages {
		cams = make([]string, m.srv.NumImages)
		for i := range cams {
			cams[i] = fmt.Sprintf("camera %d", i)
		}
	}
	out.PI05 = &console.PI05Form{Cameras: cams, StateDim: stateDim(p), ActionDim: p.Config.ActionDim(),
		Horizon: m.srv.ActionHorizon, Steps: m.srv.NumSteps, MaxBodyBytes: MaxBodyBytes}
	return out
}

// stateDim is how many state values a request may give: the normalization
// statistics' length, else the config's maximum.
func stateDim(p *pi05.Policy) int {
	if p.Norm.State != nil {
		return len(p.Norm.State.Q01)
	}
	return p.Config.MaxStateDim
}

// deviceStates is each device in a few words: "0 serve ok (cpus 0,1), 1 serve quarantined".
func deviceStates(devs []serving.DeviceInfo) string {
	parts := make([]string, len(devs))
	for i, d := range devs {
		parts[i] = fmt.Sprintf("%d %s %s", d.ID, d.Role, d.State)
		if len(d.CPUs) > 0 {
			parts[i] += " (cpus " + chips.Format(d.CPUs) + ")"
		}
	}
	return strings.Join(parts, ", ")
}
