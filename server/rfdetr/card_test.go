package rfdetr

import (
	"testing"

	"github.com/ttmodel/tt-model/server/modeltest"
)

// The model card of models/rf-detr lists exactly the routes its server answers
// (modeltest.CheckCard).
func TestCardListsExactlyTheServedRoutes(t *testing.T) {
	t.Run("rf-detr", func(t *testing.T) {
		modeltest.CheckCard(t, "../../models/rf-detr/tt-model.yaml", newRFDETRTestModel(twoLabelOutputs()))
	})
}
