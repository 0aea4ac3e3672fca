package api

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// Flags are tt-model-server's command-line flags. They are declared here,
// beside the route table, so that tt-model (built without cgo) checks the
// server arguments of `serve -- ARGS` and of its help examples against the
// flag set the server really parses.
type Flags struct {
	Host, Port, Model, LogLevel string
	// APIKeyFile names a file holding the API key (TT_API_KEY otherwise).
	APIKeyFile      string
	Verify, Version bool
}

// Bind declares the flags on fs; kinds are the models --model can name, weightsVars the variables
// --model auto picks one by (tt-model-server's registry of the models it serves gives both).
func (f *Flags) Bind(fs *flag.FlagSet, kinds, weightsVars []string) {
	fs.StringVar(&f.Host, "host", "0.0.0.0", "address to listen on")
	fs.StringVar(&f.Port, "port", "8000", "port to listen on")
	auto := "HF_MODEL"
	if len(weightsVars) > 0 {
		auto = strings.Join(weightsVars, ", ") + " or " + auto
	}
	fs.StringVar(&f.Model, "model", "auto", "model to serve: "+strings.Join(kinds, ", ")+", or auto (from "+auto+")")
	fs.StringVar(&f.APIKeyFile, "api-key-file", "", "file holding the API key every route but /health and /healthz requires (Authorization: Bearer KEY); default: "+APIKeyEnv+", else none")
	fs.BoolVar(&f.Verify, "verify", false, "print the configuration and CPU features, open no weights, exit 0 (image builds)")
	fs.BoolVar(&f.Version, "version", false, "print the version and exit")
	fs.StringVar(&f.LogLevel, "log-level", "info", "debug, info, warn or error")
}

// APIKeyEnv is the variable that holds the server's API key when
// --api-key-file is not given (vLLM's VLLM_API_KEY, SGLang's --api-key).
const APIKeyEnv = "TT_API_KEY"

// APIKeyFileEnv names a file holding the API key: how a container or a
// systemd unit passes it without putting the key itself in the environment
// of every process or in argv.
const APIKeyFileEnv = "TT_API_KEY_FILE"

// LoadAPIKey reads the server's API key: from file (--api-key-file), else
// from the file TT_API_KEY_FILE names, else TT_API_KEY itself; "" when none
// is set. source says where it came from, never the key. Surrounding
// whitespace (a file's trailing newline) is not part of the key.
func LoadAPIKey(file string, getenv func(string) string) (key, source string, err error) {
	what := "--api-key-file"
	if file == "" {
		file, what = getenv(APIKeyFileEnv), APIKeyFileEnv
	}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", "", fmt.Errorf("%s: %w", what, err)
		}
		if key = strings.TrimSpace(string(data)); key == "" {
			return "", "", fmt.Errorf("%s %s: the file is empty", what, file)
		}
		return key, what + " " + file, nil
	}
	if key = strings.TrimSpace(getenv(APIKeyEnv)); key != "" {
		return key, APIKeyEnv, nil
	}
	if getenv(APIKeyEnv) != "" {
		return "", "", errors.New(APIKeyEnv + " is blank")
	}
	return "", "", nil
}
