package server

import (
	"strings"
	"testing"
	"time"
)

func TestParseFault(t *testing.T) {
	for in, want := range map[string]Fault{
		"":                      {Device: -1},
		"exit:after=2":          {Kind: "exit", After: 2, Device: -1},
		"hang:device=1,after=3": {Kind: "hang", After: 3, Device: 1},
		"hang:after=1":          {Kind: "hang", After: 1, Device: 0},
		"delay:ms=300":          {Kind: "delay", Delay: 300 * time.Millisecond, Device: -1},
		"delay:ms=5,device=2":   {Kind: "delay", Delay: 5 * time.Millisecond, Device: 2},
	} {
		got, err := ParseFault(in)
		if err != nil || got != want {
			t.Errorf("ParseFault(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"exit", "exit:after=0", "hang:device=1", "crash:after=1", "delay:ms=x", "exit:after=1,device=2", "hang:after=-1"} {
		if _, err := ParseFault(in); err == nil || !strings.Contains(err.Error(), "TT_MODEL_FAULT") {
			t.Errorf("ParseFault(%q) = %v, want an error naming TT_MODEL_FAULT", in, err)
		}
	}
}
