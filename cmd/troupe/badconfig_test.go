package main

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/troupe-rl/troupe/generation/builtin/servertest"
)

// TestBadConfigsFailFast: bad experiment configs fail before any work, with
// one message naming the problem, and exit code 2.
func TestBadConfigsFailFast(t *testing.T) {
	srv := servertest.Start(t, servertest.Options{})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	dir := t.TempDir()
	base := func(env, gen string) string {
		return fmt.Sprintf("name: bad\nruns_dir: %s\nenv: {%s}\ngeneration: {backend: openai, base_urls: [%s], model: tiny%s}\n", dir, env, srv.URL, gen)
	}
	cases := []struct {
		name, yaml string
		overrides  []string
		want       string
	}{
		{"unknown env", base("name: chess", ""), nil, `unknown environment "chess"`},
		{"alpha out of range", base("name: planpath, alpha: 1.5", ""), nil, "env.alpha: must be in [0, 1]"},
		{"alpha override", base("name: planpath", ""), []string{"env.alpha=-0.1"}, "env.alpha"},
		{"missing model folder", base("name: planpath", ", tokenizer: /nonexistent/model"), nil, "/nonexistent/model"},
		{"unreachable server", base("name: planpath", ""), []string{"generation.base_urls=[" + dead + "]"}, "no server answers"},
		{"unknown backend", base("name: planpath", ""), []string{"generation.backend=vllm"}, `unknown backend "vllm"`},
		{"misspelt key", base("name: planpath, max_turn: 3", ""), nil, `env.max_turn: unknown key (did you mean "env.max_turns"?)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeConfig(t, t.TempDir(), tc.yaml)
			for _, cmd := range []string{"rollout", "eval"} {
				out, errs, code := runCLI(append([]string{cmd, cfg}, tc.overrides...)...)
				if code != 2 || !strings.Contains(errs, tc.want) {
					t.Fatalf("%s: exit %d, stderr %q (want exit 2 naming %q)\nstdout %s", cmd, code, errs, tc.want, out)
				}
				if strings.Count(strings.TrimSpace(errs), "\n") > 1 {
					t.Errorf("%s: more than one message:\n%s", cmd, errs)
				}
			}
		})
	}
}
