package pi05

import (
	"fmt"
	"testing"
	"time"

	"github.com/ttmodel/tt-model/internal/testing/servertest"
	"github.com/ttmodel/tt-model/server"
	"github.com/ttmodel/tt-model/server/modeltest"
)

// Issue: a slow or silent client must never hold the model (modeltest.CheckStalledClients), with a
// pi0.5 request as the good one.
func TestStalledClientsDoNotHoldTheModel(t *testing.T) {
	limits := server.BodyLimits{Idle: 2 * time.Second, MinRate: 1, Grace: time.Hour}
	base, _ := runPI05(t, nil, server.Options{Body: limits})
	modeltest.CheckStalledClients(t, base, func() int {
		img, _ := pi05Frame(t, 16, 16, 1)
		code, _ := servertest.Post(t, base+"/predict", fmt.Sprintf(`{"images": [%q], "prompt": "go", "seed": 1}`, img))
		return code
	})
}
