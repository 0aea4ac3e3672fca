package main

import (
	"fmt"
	"strings"

	"github.com/ttmodel/tt-model/internal/version"
	"github.com/ttmodel/tt-model/models/pi05/pi05native"
	"github.com/ttmodel/tt-model/models/rfdetr/rfdetrnative"
	"github.com/ttmodel/tt-model/native"
	"github.com/ttmodel/tt-model/server"
	"github.com/ttmodel/tt-model/server/api"
	"github.com/ttmodel/tt-model/server/pi05"
	"github.com/ttmodel/tt-model/server/rfdetr"
)

// servedModel is one model this binary serves: everything tt-model-server knows of it beyond its
// own package tree (server/<model>, models/<model>) and its kind's route table (server/api, which
// tt-model reads without this binary).
type servedModel struct {
	kind    string   // --model's name, the route table's key (api.Kind*)
	name    string   // how messages name it
	aliases []string // other spellings --model takes
	// weightsVar names the model's weights folder: --model auto picks the model when it is set.
	weightsVar string
	// hfNames are what an HF_MODEL repo id or snapshot path contains when it names the model.
	hfNames      []string
	precisionVar string // the kernels' precision, its default and choices
	precisionDef native.Precision
	precisions   []native.Precision
	// deviceFaults: TT_MODEL_FAULT's hang and delay act on this model (they need the pi0.5
	// serving engine's devices); every model takes exit:after=N.
	deviceFaults bool
	// build makes the model's server.Model from the environment at c's settings; a bad setting is
	// an error naming the variable (exit 2). The model's rules for its environment's PI05_* and
	// TT_* variables (its package's envRules) are checked here.
	build func(env environment, c config) (server.Model, error)
}

// servedModels are the models this binary serves, in the order --model auto tries them and the
// messages name them: the one list that --model (and its help), auto selection, the precision
// checks and serve read, so a model added here is named by --help and served by --model.
func servedModels() []servedModel {
	return []servedModel{
		{kind: api.KindRFDETR, name: "RF-DETR", aliases: []string{"rfdetr", "rf_detr"}, weightsVar: "TT_RF_DETR_WEIGHTS",
			hfNames: []string{"rf-detr", "rfdetr", "rf_detr"}, precisionVar: "RFDETR_PRECISION", precisionDef: native.FP32,
			precisions: []native.Precision{native.FP32, native.BF16}, build: rfdetrModel},
		{kind: api.KindPI05, name: "pi0.5", aliases: []string{"pi0.5", "pi0_5"}, weightsVar: "PI05_WEIGHTS_DIR",
			hfNames: []string{"pi05", "pi0.5", "pi0_5"}, precisionVar: "PI05_PRECISION", precisionDef: native.BF16,
			precisions: []native.Precision{native.BF16, native.FP32, native.Ref}, deviceFaults: true, build: pi05Model},
	}
}

// servedModelOf is the entry of kind; ok false for a kind this binary does not serve.
func servedModelOf(kind string) (m servedModel, ok bool) {
	for _, m := range servedModels() {
		if m.kind == kind {
			return m, true
		}
	}
	return servedModel{}, false
}

// servedKinds are the kinds of servedModels, in its order.
func servedKinds() []string {
	var kinds []string
	for _, m := range servedModels() {
		kinds = append(kinds, m.kind)
	}
	return kinds
}

// weightsVars are the served models' weightsVar, in order: what --model auto reads.
func weightsVars() []string {
	var vars []string
	for _, m := range servedModels() {
		vars = append(vars, m.weightsVar)
	}
	return vars
}

// selectModel resolves --model: an explicit kind (or an alias) is checked; "" or "auto" is
// decided from the environment: a served model's weightsVar, else an HF_MODEL repo id or snapshot
// path naming one (as the Hub cache's models--Roboflow--rf-detr-base/… paths do), in the order
// of servedModels.
func selectModel(flag string, getenv func(string) string) (string, error) {
	models, kinds := servedModels(), servedKinds()
	if f := strings.ToLower(flag); f != "" && f != "auto" {
		for _, m := range models {
			if f == m.kind || contains(m.aliases, f) {
				return m.kind, nil
			}
		}
		return "", fmt.Errorf("--model %q: this server knows %s and %s", flag, strings.Join(kinds[:len(kinds)-1], ", "), kinds[len(kinds)-1])
	}
	for _, m := range models {
		if getenv(m.weightsVar) != "" {
			return m.kind, nil
		}
	}
	hf := strings.ToLower(getenv("HF_MODEL"))
	for _, m := range models {
		for _, s := range m.hfNames {
			if strings.Contains(hf, s) {
				return m.kind, nil
			}
		}
	}
	if hf == "" {
		var set []string
		for _, v := range weightsVars() {
			set = append(set, v+"=<dir>")
		}
		return "", fmt.Errorf("no model to serve: pass --model %s, or set %s or HF_MODEL=<org/name or snapshot dir>", strings.Join(kinds, "|"), strings.Join(set, ", "))
	}
	return "", fmt.Errorf("HF_MODEL=%s does not name a model this server knows (%s); pass --model", getenv("HF_MODEL"), strings.Join(kinds, ", "))
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// rfdetrModel builds the RF-DETR server from its environment (RFDETR_*,
// TT_RF_DETR_WEIGHTS, HF_MODEL) on the native kernels at c's precision; a bad
// setting is an error naming the variable (exit 2).
func rfdetrModel(env environment, c config) (server.Model, error) {
	rep, err := rfdetr.Environment(env.list())
	if err != nil {
		return nil, err
	}
	return rfdetr.New(rfdetr.Options{
		Env:    rep,
		Getenv: env.get,
		Build: rfdetrnative.Builder(rfdetrnative.Options{RFDETROptions: native.RFDETROptions{Precision: c.precision, Threads: c.threads},
			CacheDir: c.cacheDir, Tuning: c.tuning}),
		Device:  c.device(),
		Version: version.Version,
	}), nil
}

// pi05Model builds the pi0.5 policy server from PI05_*, TT_*, HF_MODEL and TT_WEIGHTS_REVISION, on
// the native kernels at c's precision with its packed-weights cache and GEMM tuning; a bad setting is
// an error naming the variable (exit 2).
func pi05Model(env environment, c config) (server.Model, error) {
	return pi05.New(pi05.Options{
		Getenv:    env.get,
		Environ:   env.list,
		Build:     pi05native.Builder(pi05native.Options{Precision: c.precision, CacheDir: c.cacheDir, Tuning: c.tuning}),
		Precision: string(c.precision),
		Fault:     c.fault,
		Version:   version.Version,
	})
}
