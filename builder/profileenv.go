package builder

import (
	"fmt"
	"sort"

	"github.com/ttmodel/tt-model/manifest"
)

// profileLaunch is one profile resolved to the launch every runner starts
// it with.
type profileLaunch struct {
	Name   string
	Launch manifest.Launch
}

// profileLaunches resolves every profile of m, first the one named first
// ("" = the default), then the others in the manifest's order.
func profileLaunches(m *manifest.Manifest, first string) ([]profileLaunch, error) {
	if first == "" {
		first = m.DefaultProfileName()
	}
	profiles := m.Profiles()
	sort.SliceStable(profiles, func(i, j int) bool { return profiles[i].Name == first && profiles[j].Name != first })
	out := make([]profileLaunch, 0, len(profiles))
	for _, p := range profiles {
		rp, err := m.ResolveProfile(p.Name)
		if err != nil {
			return nil, err
		}
		l, err := manifest.LaunchFor(m.Kind, m.Runtime, m.Weights.Repo, rp)
		if err != nil {
			return nil, fmt.Errorf("profile %s: %w", rp.Name, err)
		}
		out = append(out, profileLaunch{Name: rp.Name, Launch: l})
	}
	return out, nil
}

// sharedEnv is the part of the profiles' server environment that does not
// depend on the profile: the variables every profile sets, to the same
// value. Only these go into an image's Env. A runner can override an image's
// variable but not unset it (`docker run --env`, a pod's env), so a variable
// that one profile sets and another does not would stay set in a server of
// the other profile if the image carried it.
func sharedEnv(launches []profileLaunch) map[string]string {
	shared := map[string]string{}
	if len(launches) == 0 {
		return shared
	}
	for k, v := range launches[0].Launch.Env {
		shared[k] = v
	}
	for _, pl := range launches[1:] {
		for k, v := range shared {
			if w, ok := pl.Launch.Env[k]; !ok || w != v {
				delete(shared, k)
			}
		}
	}
	return shared
}

// defaultEnvFlags are the supervisor flags that give the server the rest of
// l's environment (what shared lacks), in the kind's order:
// `--default-env KEY=VALUE` each, which the supervisor applies unless its
// own environment sets KEY. In the image's entrypoint they make a plain
// `docker run IMAGE` serve its default profile with that profile's whole
// environment (`docker run -e KEY=…` still wins, as over an image ENV),
// while a runner that serves another profile drops them with the rest of
// the image's default launch (see runner.supervisedEntrypoint) and passes
// that profile's own environment.
func defaultEnvFlags(l manifest.Launch, shared map[string]string) []string {
	var flags []string
	for _, k := range l.EnvOrder {
		if _, ok := shared[k]; ok {
			continue
		}
		flags = append(flags, "--default-env", k+"="+l.Env[k])
	}
	return flags
}

// launchEnv is l's environment as KEY=VALUE, in the kind's order.
func launchEnv(l manifest.Launch) []string {
	env := make([]string, 0, len(l.EnvOrder))
	for _, k := range l.EnvOrder {
		env = append(env, k+"="+l.Env[k])
	}
	return env
}
