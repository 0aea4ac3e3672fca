package pi05

import "github.com/ttmodel/tt-model/server"

// envRules are pi0.5's rules for its PI05_* and TT_* variables: what New reads, plus these.
func envRules(read map[string]bool) server.EnvRules {
	return server.EnvRules{Read: read, Refuse: "PI05_",
		Elsewhere: server.Merge(server.SupervisorVars(), server.MainVars(), map[string]string{
			"PI05_PRECISION": "", // main: the kernels' precision
		}),
		NoEffect: map[string]string{
			"TT_RF_DETR_WEIGHTS":        "it locates RF-DETR's weights; this server serves pi0.5",
			"RFDETR_PRECISION":          "it is RF-DETR's precision; pi0.5's is PI05_PRECISION",
			"TT_MODEL_FAULT_EXIT_AFTER": "", // refused by main: replaced by TT_MODEL_FAULT=exit:after=N
		},
		Chips: server.ChipVars()}
}
