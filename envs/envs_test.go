package envs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/internal/config"
)

type nopEnv struct{ envs.Env }

func TestRegistry(t *testing.T) {
	envs.Register("test-nop", func(envs.Config, envs.Deps) (envs.Env, error) { return nopEnv{}, nil })
	for _, tc := range []struct {
		name string
		f    envs.Factory
	}{{"test-nop", func(envs.Config, envs.Deps) (envs.Env, error) { return nil, nil }}, {"test-nil", nil}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", tc.name)
				}
			}()
			envs.Register(tc.name, tc.f)
		}()
	}
	if _, err := envs.New("test-nop", envs.DefaultConfig("x"), envs.Deps{}); err != nil {
		t.Fatal(err)
	}
	_, err := envs.New("nosuch", envs.DefaultConfig("nosuch"), envs.Deps{})
	if err == nil || !strings.Contains(err.Error(), `envs: unknown environment "nosuch" (forgotten import?)`) {
		t.Fatalf("unknown: %v", err)
	}
	var bi interface{ BadInput() bool }
	if !errors.As(err, &bi) || !bi.BadInput() {
		t.Fatal("unknown environment is not BadInput")
	}
	bad := envs.DefaultConfig("test-nop")
	bad.Mode = "duo"
	if _, err := envs.New("test-nop", bad, envs.Deps{}); err == nil || !strings.Contains(err.Error(), "mode") {
		t.Fatalf("bad mode: %v", err)
	}
}

func TestConfig(t *testing.T) {
	var c struct {
		Env envs.Config `yaml:"env"`
	}
	if err := config.Decode("x.yaml", []byte("env:\n  name: planpath\n  planpath:\n    wall_prob: 0.3\n"), &c); err != nil {
		t.Fatal(err)
	}
	if c.Env.PlanPath.WallProb != 0.3 || c.Env.PlanPath.Step != -0.01 || c.Env.Sokoban.Win != 10 || c.Env.Mode != "multi" || c.Env.Tool.Timeout.Seconds() != 20 {
		t.Fatalf("%+v", c.Env)
	}
	for _, tc := range []struct{ yaml, key string }{
		{"env:\n  name: planpath\n  planpath:\n    wall_prob: 0.9\n", "env.planpath.wall_prob"},
		{"env:\n  name: sokoban\n  sokoban:\n    shaping:\n      gamma: 2\n", "env.sokoban.shaping.gamma"},
		{"env:\n  name: sokoban\n  mode: both\n", "env.mode"},
		{"env:\n  name: sudoku\n  tool:\n    timeout: 0s\n", "env.tool.timeout"},
	} {
		err := config.Decode("x.yaml", []byte(tc.yaml), &c)
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("%q: got %v, want an error naming %s", tc.yaml, err, tc.key)
		}
	}
}

func TestPromptAndMix(t *testing.T) {
	p := envs.Prompt{System: "sys", User: "user"}
	if m := p.Messages(); len(m) != 2 || m[0].Role != "system" || m[1].Content != "user" {
		t.Fatal(m)
	}
	if p.Text() != "sys\n\nuser" || (envs.Prompt{User: "u"}).Text() != "u" || len((envs.Prompt{User: "u"}).Messages()) != 1 {
		t.Fatal("Text")
	}
	if got := envs.Mix(0.7, 1, 0); got != 0.7 {
		t.Fatal(got)
	}
	if envs.Split(envs.ValidationSeedBase-1) != "train" || envs.Split(envs.ValidationSeeds(3)[2]) != "eval" {
		t.Fatal("split")
	}
}
