package server

import (
	"fmt"
	"strings"
)

// Model kinds tt-model-server can serve (--model).
const (
	KindRFDETR = "rf-detr"
	KindPI05   = "pi05"
)

// SelectModel resolves --model: an explicit kind is checked; "" or "auto"
// is decided from the environment — TT_RF_DETR_WEIGHTS or PI05_WEIGHTS_DIR,
// or an HF_MODEL repo id or snapshot path naming RF-DETR or pi0.5 (as the
// Hub cache's models--Roboflow--rf-detr-base/… paths do).
func SelectModel(flag string, getenv func(string) string) (string, error) {
	switch strings.ToLower(flag) {
	case KindRFDETR, "rfdetr", "rf_detr":
		return KindRFDETR, nil
	case KindPI05, "pi0.5", "pi0_5":
		return KindPI05, nil
	case "", "auto":
	default:
		return "", fmt.Errorf("--model %q: this server knows %s and %s", flag, KindRFDETR, KindPI05)
	}
	if getenv("TT_RF_DETR_WEIGHTS") != "" {
		return KindRFDETR, nil
	}
	if getenv("PI05_WEIGHTS_DIR") != "" {
		return KindPI05, nil
	}
	hf := strings.ToLower(getenv("HF_MODEL"))
	for _, s := range []string{"pi05", "pi0.5", "pi0_5"} {
		if strings.Contains(hf, s) {
			return KindPI05, nil
		}
	}
	for _, s := range []string{"rf-detr", "rfdetr", "rf_detr"} {
		if strings.Contains(hf, s) {
			return KindRFDETR, nil
		}
	}
	if hf == "" {
		return "", fmt.Errorf("no model to serve: pass --model %s|%s, or set TT_RF_DETR_WEIGHTS=<dir>, PI05_WEIGHTS_DIR=<dir> or HF_MODEL=<org/name or snapshot dir>", KindRFDETR, KindPI05)
	}
	return "", fmt.Errorf("HF_MODEL=%s does not name a model this server knows (%s, %s); pass --model", getenv("HF_MODEL"), KindRFDETR, KindPI05)
}
