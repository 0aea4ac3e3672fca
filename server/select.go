package server

import (
	"fmt"
	"strings"
)

// Model kinds tt-model-server can serve (--model).
const (
	KindRFDETR = "rf-detr"
)

// SelectModel resolves --model: an explicit kind is checked; "" or "auto"
// is decided from the environment — TT_RF_DETR_WEIGHTS, or an HF_MODEL repo
// id or snapshot path naming RF-DETR (as the Hub cache's
// models--Roboflow--rf-detr-base/… paths do).
func SelectModel(flag string, getenv func(string) string) (string, error) {
	switch strings.ToLower(flag) {
	case KindRFDETR, "rfdetr", "rf_detr":
		return KindRFDETR, nil
	case "", "auto":
	default:
		return "", fmt.Errorf("--model %q: this server knows %s", flag, KindRFDETR)
	}
	if getenv("TT_RF_DETR_WEIGHTS") != "" {
		return KindRFDETR, nil
	}
	hf := strings.ToLower(getenv("HF_MODEL"))
	for _, s := range []string{"rf-detr", "rfdetr", "rf_detr"} {
		if strings.Contains(hf, s) {
			return KindRFDETR, nil
		}
	}
	if hf == "" {
		return "", fmt.Errorf("no model to serve: pass --model %s, or set TT_RF_DETR_WEIGHTS=<dir> or HF_MODEL=<org/name or snapshot dir>", KindRFDETR)
	}
	return "", fmt.Errorf("HF_MODEL=%s does not name a model this server knows (%s); pass --model", getenv("HF_MODEL"), KindRFDETR)
}
