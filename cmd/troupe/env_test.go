package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/troupe-rl/troupe/envs"
)

func TestEnvSample(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		lines int
		size  int
		split string
	}{
		{[]string{"env", "sample", "planpath", "--n", "3", "--seed", "7"}, 3, 10, "train"},
		{[]string{"env", "sample", "sudoku", "--n", "2", "--size", "6", "--eval"}, 2, 6, "eval"},
		{[]string{"env", "sample", "sokoban", "--n", "2", "sokoban.boxes=2", "--size", "7"}, 2, 7, "train"},
	} {
		out, errOut, code := runCLI(tc.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != tc.lines {
			t.Fatalf("%v: %d lines", tc.args, len(lines))
		}
		for _, l := range lines {
			var task envs.Task
			if err := json.Unmarshal([]byte(l), &task); err != nil {
				t.Fatal(err)
			}
			if task.Size != tc.size || task.Split != tc.split || task.SolutionLen < 1 || task.ID == "" || task.Board == "" || task.Solution == "" {
				t.Errorf("%v: %+v", tc.args, task)
			}
		}
	}
	again, _, _ := runCLI("env", "sample", "planpath", "--n", "3", "--seed", "7")
	first, _, _ := runCLI("env", "sample", "planpath", "--n", "3", "--seed", "7")
	if again != first {
		t.Error("env sample is not deterministic")
	}
}

func TestEnvSampleBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"env"},
		{"env", "sample"},
		{"env", "list"},
		{"env", "sample", "nosuch"},
		{"env", "sample", "sudoku", "--size", "5"},
		{"env", "sample", "planpath", "--n", "0"},
		{"env", "sample", "planpath", "--bogus"},
		{"env", "sample", "planpath", "planpath.wall_prob=0.9"},
		{"env", "sample", "planpath", "nokey=1"},
	} {
		if _, errOut, code := runCLI(args...); code != 2 || errOut == "" {
			t.Errorf("%v: exit %d (%q), want 2 with a message", args, code, errOut)
		}
	}
}
