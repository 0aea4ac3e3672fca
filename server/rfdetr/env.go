package rfdetr

import "github.com/ttmodel/tt-model/server"

// envRules are RF-DETR's rules for its PI05_* and TT_* variables.
func envRules() server.EnvRules {
	return server.EnvRules{
		Read: map[string]bool{"TT_RF_DETR_WEIGHTS": true, "TT_WEIGHTS_REVISION": true},
		Elsewhere: server.Merge(server.SupervisorVars(), server.MainVars(), map[string]string{
			"RFDETR_PRECISION": "", "TT_NUM_THREADS": "", // main and the kernels
			"PI05_HANG_MARKER": "is read by tt-model supervise: the hang marker it writes on exit 75",
		}),
		NoEffect: map[string]string{"TT_MODEL_FAULT_EXIT_AFTER": ""}, // refused by main
		// RF-DETR runs on one device: the mesh shape the launcher sets is a chip setting too.
		Chips:   server.Merge(server.ChipVars(), map[string]bool{"TT_MESH_SHAPE": true}),
		Foreign: map[string]string{"PI05_": "it is a pi0.5 setting and this server serves RF-DETR"},
	}
}
