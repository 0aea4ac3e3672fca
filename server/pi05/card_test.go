package pi05

import (
	"testing"

	"github.com/ttmodel/tt-model/server/modeltest"
)

// The model card of models/pi05 lists exactly the routes its server answers (modeltest.CheckCard).
func TestCardListsExactlyTheServedRoutes(t *testing.T) {
	t.Run("pi05", func(t *testing.T) {
		modeltest.CheckCard(t, "../../models/pi05/tt-model.yaml", newPI05TestModel(t, nil))
	})
}
