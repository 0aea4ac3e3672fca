package server

import (
	"fmt"
	"strings"

	"github.com/ttmodel/tt-model/server/api"
)

// SelectModel resolves --model: an explicit kind is checked; "" or "auto"
// is decided from the environment — TT_RF_DETR_WEIGHTS or PI05_WEIGHTS_DIR,
// or an HF_MODEL repo id or snapshot path naming RF-DETR or pi0.5 (as the
// Hub cache's models--Roboflow--rf-detr-base/… paths do).
func SelectModel(flag string, getenv func(string) string) (string, error) {
	switch strings.ToLower(flag) {
	case api.KindRFDETR, "rfdetr", "rf_detr":
		return api.KindRFDETR, nil
	case api.KindPI05, "pi0.5", "pi0_5":
		return api.KindPI05, nil
	case "", "auto":
	default:
		return "", fmt.Errorf("--model %q: this server knows %s and %s", flag, api.KindRFDETR, api.KindPI05)
	}
	if getenv("TT_RF_DETR_WEIGHTS") != "" {
		return api.KindRFDETR, nil
	}
	if getenv("PI05_WEIGHTS_DIR") != "" {
		return api.KindPI05, nil
	}
	hf := strings.ToLower(getenv("HF_MODEL"))
	for _, s := range []string{"pi05", "pi0.5", "pi0_5"} {
		if strings.Contains(hf, s) {
			return api.KindPI05, nil
		}
	}
	for _, s := range []string{"rf-detr", "rfdetr", "rf_detr"} {
		if strings.Contains(hf, s) {
			return api.KindRFDETR, nil
		}
	}
	if hf == "" {
		return "", fmt.Errorf("no model to serve: pass --model %s|%s, or set TT_RF_DETR_WEIGHTS=<dir>, PI05_WEIGHTS_DIR=<dir> or HF_MODEL=<org/name or snapshot dir>", api.KindRFDETR, api.KindPI05)
	}
	return "", fmt.Errorf("HF_MODEL=%s does not name a model this server knows (%s, %s); pass --model", getenv("HF_MODEL"), api.KindRFDETR, api.KindPI05)
}
