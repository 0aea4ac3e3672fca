package server

import (
	"fmt"

	"github.com/ttmodel/tt-model/models/pi05"
	"github.com/ttmodel/tt-model/server/api"
	"github.com/ttmodel/tt-model/server/console"
)

// Console is pi0.5 on the console: the weights' pin, the device and the
// presets, and a form that sends camera pictures, a prompt and a state to
// POST /v1/actions/generations.
func (m *PI05) Console() console.Model {
	p, dir := m.current()
	facts := []console.Fact{{Label: "Weights", Value: pin(m.srv.HFModel, m.srv.Revision)}}
	if dir != "" {
		facts = append(facts, console.Fact{Label: "Weights folder", Value: dir})
	}
	if d := m.Device(); d != "" {
		facts = append(facts, console.Fact{Label: "Device", Value: d})
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
		Horizon: m.srv.ActionHorizon, Steps: m.srv.NumSteps, MaxBodyBytes: PI05MaxBodyBytes}
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
