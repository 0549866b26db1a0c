package main

import (
	"context"

	"github.com/troupe-rl/troupe/internal/report"
	"github.com/troupe-rl/troupe/learner/trajectory"
)

func init() {
	register(&command{
		name:    "replay",
		args:    "PATH [--show N] [--role R] [--turn T] [--success|--failed] [--episode ID] [--split train|eval] [--prompts] [--branches]",
		summary: "print transcripts and statistics of stored trajectories",
		detail: `PATH is a trajectory shard, a trajectories folder or a run folder. Prints the first N
matching episodes as transcripts (header with problem, env, split, iteration and outcome; per
step the role, turn, branch, rewards local/team/mixed, the env's verdict and info, the finish
reason and the completion; sibling branches on one line each) and then statistics over every
matching episode: success rate, reward by role and turn, completion length, finish reasons,
verdicts and the parse-failure rate by role. No server is needed.
--role and --turn keep only those steps (and the episodes that have one); --success and
--failed select episodes by outcome. A missing or corrupt file exits with code 2.`,
		run: runReplay,
	})
}

func runReplay(ctx context.Context, env *cliEnv, args []string) error {
	c := commands["replay"]
	fs := newFlags(env, c)
	show := fs.Int("show", 3, "number of episodes to print in full (0 = statistics only)")
	role := fs.String("role", "", "keep only this role's steps")
	turn := fs.Int("turn", -1, "keep only this turn's steps (0-based; -1 = all)")
	succ := fs.Bool("success", false, "keep only successful episodes")
	failed := fs.Bool("failed", false, "keep only failed episodes")
	episode := fs.String("episode", "", "keep only the episode with this id")
	split := fs.String("split", "", "keep only rows of this split (train or eval)")
	prompts := fs.Bool("prompts", false, "print each step's prompt")
	branches := fs.Bool("branches", false, "print every branch's completion, not only the chosen one")
	pos, err := parseFlags(env, c, fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one PATH")
	}
	if *show < 0 {
		return usagef("--show must be ≥ 0")
	}
	if *succ && *failed {
		return usagef("--success and --failed exclude each other")
	}
	if *split != "" && *split != trajectory.SplitTrain && *split != trajectory.SplitEval {
		return usagef("--split must be train or eval, not %q", *split)
	}
	opts := report.ReplayOptions{Show: *show, Role: *role, Turn: *turn, Episode: *episode, Split: *split, Prompts: *prompts, Branches: *branches}
	if *succ || *failed {
		v := *succ
		opts.Success = &v
	}
	return report.Replay(ctx, env.stdout, pos[0], opts)
}
