package kube

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/ttmodel/tt-model/manifest"
)

// kubeletExpand is the kubelet's variable expansion (k8s.io/kubernetes
// third_party/forked/golang/expansion, which is not importable): $$ is $,
// $(NAME) is NAME's value when vars has it and stays as written when not, an
// unclosed $( and a $ before anything else stay as written.
func kubeletExpand(s string, vars map[string]string) string {
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			out = append(out, s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			out = append(out, '$')
			i++
		case '(':
			end := -1
			for j := i + 2; j < len(s); j++ {
				if s[j] == ')' {
					end = j
					break
				}
			}
			if end < 0 {
				out = append(out, "$("...)
				i++
				continue
			}
			if v, ok := vars[s[i+2:end]]; ok {
				out = append(out, v...)
			} else {
				out = append(out, s[i:end+1]...)
			}
			i = end
		default:
			out = append(out, s[i], s[i+1])
			i++
		}
	}
	return string(out)
}

// kubeletView is what the container's processes get: each env value expanded
// with the variables before it (as the kubelet builds the environment), then
// the command, args and exec probe expanded with all of them.
func kubeletView(c corev1.Container) (env map[string]string, command, args, probe []string) {
	env = map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = kubeletExpand(e.Value, env)
		}
	}
	expand := func(words []string) []string {
		out := make([]string, len(words))
		for i, w := range words {
			out[i] = kubeletExpand(w, env)
		}
		return out
	}
	return env, expand(c.Command), expand(c.Args), expand(c.ReadinessProbe.Exec.Command)
}

func TestKubeletExpand(t *testing.T) {
	vars := map[string]string{"A": "x", "B": "$(A)"}
	for in, want := range map[string]string{
		"$(A)": "x", "$$(A)": "$(A)", "$$": "$", "$": "$", "a$b": "a$b", "$(C)": "$(C)",
		"$(A": "$(A", "$(B)": "$(A)", "$$$(A)": "$x", "$$$$": "$$",
	} {
		if got := kubeletExpand(in, vars); got != want {
			t.Errorf("kubeletExpand(%q) = %q, want %q", in, got, want)
		}
	}
}

// A profile's env values and args reach the server as `tt-model profiles`
// shows them, whatever $(…) and $$ they hold: after the kubelet's expansion
// of the rendered container (env in order, then command, args and the exec
// probe), each is the launch's own value. (Unescaped, "$(HF_HOME)" became
// /hf and "$$" became "$".)
func TestRenderKeepsDollarsLiteral(t *testing.T) {
	const note = "a$(HF_HOME)b$$c$(TT_WEIGHT_CACHE)$(POD_NAME)$(d$"
	arg := manifest.Arg{"--note", "$(PORT)$$x$"}
	pkg := stagedPackage(t, "pi05", func(w *manifest.Wire) {
		for i := range w.Container.ServeProfiles {
			p := &w.Container.ServeProfiles[i]
			if p.Env == nil {
				p.Env = map[string]string{}
			}
			p.Env["TT_NOTE"] = note
			p.Args = append(p.Args, arg)
		}
	})
	for _, profile := range profiles(pkg) {
		m, err := Render(pkg, Options{Registry: testRegistry, Profile: profile, ResetCmd: "reset $(CHIP) $$"})
		if err != nil {
			t.Fatal(err)
		}
		_, launch, err := pkg.Launch(profile)
		if err != nil {
			t.Fatal(err)
		}
		pod := m.StatefulSet.Spec.Template.Spec
		c := pod.Containers[0]
		env, command, args, probe := kubeletView(c)
		for k, v := range launch.Env {
			if _, derived := map[string]bool{"HF_HOME": true, "TT_METAL_CACHE": true, "HF_MODEL": true}[k]; !derived && env[k] != v {
				t.Errorf("%s: the server gets %s=%q, the profile has %q", profile, k, env[k], v)
			}
		}
		if env["TT_NOTE"] != note {
			t.Errorf("%s: TT_NOTE=%q, want %q", profile, env["TT_NOTE"], note)
		}
		if want := serverArgv(launch); !slices.Equal(args, want) || !slices.Contains(args, arg[1]) {
			t.Errorf("%s: the server's args %q, want %q", profile, args, want)
		}
		if i := slices.Index(command, "--reset-cmd"); i < 0 || command[i+1] != "reset $(CHIP) $$" {
			t.Errorf("%s: the supervisor's command %q", profile, command)
		}
		if want := readinessProbe(launch).Exec.Command; !slices.Equal(probe, want) {
			t.Errorf("%s: the readiness probe runs %q, want %q", profile, probe, want)
		}
	}
}
