package commands

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/ttmodel/tt-model/internal/readiness"
)

func newHealthCmd() *cobra.Command {
	var timeout time.Duration
	var degradedOK bool
	cmd := &cobra.Command{
		Use:   "health [URL]",
		Short: "Ask a model server's /health once: exit 0 when it says \"ok\", 1 otherwise",
		Long: "health GETs URL (default http://127.0.0.1:$PORT/health, PORT 8000 when unset) and exits 0 when it\n" +
			"answers 200 with JSON \"status\": \"ok\", the test `tt-model supervise` waits on. The model server's\n" +
			"/health answers 200 while it is still starting (\"status\": \"starting\"), so an HTTP probe alone\n" +
			"cannot tell: the Kubernetes readiness probe that `tt-model k8s render` writes runs this command, with\n" +
			"--degraded-ok: a server serving on fewer devices (\"degraded\", a device quarantined) still takes requests.",
		Example: "  tt-model health\n  tt-model health http://127.0.0.1:8000/health --timeout 2s --degraded-ok",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			url := defaultHealthURL(os.Getenv("PORT"))
			if len(args) == 1 {
				url = args[0]
			}
			probe := readiness.Probe
			if degradedOK {
				probe = readiness.Serving
			}
			if err := probe(cmd.Context(), &http.Client{Timeout: timeout}, url); err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ok")
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "give up on the request after this long")
	cmd.Flags().BoolVar(&degradedOK, "degraded-ok", false, "exit 0 for \"status\": \"degraded\" too (serving on the devices not quarantined)")
	return cmd
}

// defaultHealthURL is the server's /health on loopback at $PORT, else 8000.
func defaultHealthURL(port string) string {
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		p = 8000
	}
	return fmt.Sprintf("http://127.0.0.1:%d/health", p)
}
