package runnertest

// RFDETRPin is the weights revision models/rf-detr/tt-model.yaml pins.
const RFDETRPin = "7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a"

// RFDETRHangProfile is a serve profile to append to a copy of
// models/rf-detr/tt-model.yaml: "hang", made the default, in which the
// server's test-only fault switch makes it exit 75 (a device hang) after
// each prediction. env are more "NAME: value" lines of its environment.
func RFDETRHangProfile(env ...string) string {
	out := `
serve_profiles:
  - name: hang
    description: test only; the server exits 75 after each prediction
    env:
      TT_MODEL_FAULT: "exit:after=1"
`
	for _, e := range env {
		out += "      " + e + "\n"
	}
	return out + "default_profile: hang\n"
}
