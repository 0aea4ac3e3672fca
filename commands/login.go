package commands

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/ttmodel/tt-model/hub"
)

func newLoginCmd() *cobra.Command {
	var token string
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Save a Hugging Face token where huggingface_hub keeps it",
		Long: "login checks a token with the Hub (GET /api/whoami-v2) and saves it as huggingface_hub's login\n" +
			"does: as the active token in $HF_HOME/token (HF_TOKEN_PATH), and under its name in stored_tokens\n" +
			"beside it, both readable by the owner only. The token comes from --token, else stdin (read\n" +
			"without echo on a terminal). HF_TOKEN, when set, still wins over the saved token.",
		Example: "  tt-model login\n  echo \"$TOKEN\" | tt-model login\n  HF_ENDPOINT=http://127.0.0.1:8787 tt-model login --token dev-token",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := hub.ConfigFromEnv(os.Getenv)
			if err != nil {
				return err
			}
			if token == "" {
				if token, err = readSecret(cmd); err != nil {
					return &ExitError{Code: 1, Err: err}
				}
			}
			token = strings.TrimSpace(token)
			if token == "" {
				return exitf(exitInvalid, "no token given (--token, or type it on stdin)")
			}
			cfg.Token = token
			id, err := hub.NewClient(cfg).Whoami(cmd.Context())
			if err != nil {
				return &ExitError{Code: 1, Err: fmt.Errorf("the token was not saved: %w", err)}
			}
			name := id.TokenName
			if name == "" {
				name = "oauth-" + id.User
			}
			tokenPath, stored := hub.TokenPaths(os.Getenv, cfg)
			if err := hub.SaveToken(tokenPath, stored, name, token); err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "logged in to %s as %s (token %q, role %s)\n  saved to %s (and %s)\n", cfg.Endpoint, id.User, name, id.Role, tokenPath, stored)
			if os.Getenv("HF_TOKEN") != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "note: HF_TOKEN is set and is used instead of the saved token until you unset it")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "the token (default: read from stdin)")
	return cmd
}

// readSecret reads one line from stdin, with echo off on a terminal.
func readSecret(cmd *cobra.Command) (string, error) {
	in := cmd.InOrStdin()
	if f, ok := in.(*os.File); ok {
		if st, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err == nil {
			fmt.Fprint(cmd.ErrOrStderr(), "Hugging Face token (input hidden): ")
			quiet := *st
			quiet.Lflag &^= unix.ECHO
			if err := unix.IoctlSetTermios(int(f.Fd()), unix.TCSETS, &quiet); err == nil {
				defer func() {
					unix.IoctlSetTermios(int(f.Fd()), unix.TCSETS, st)
					fmt.Fprintln(cmd.ErrOrStderr())
				}()
			}
		}
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && line == "" {
		return "", fmt.Errorf("read the token from stdin: %w", err)
	}
	return line, nil
}
