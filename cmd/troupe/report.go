package main

import (
	"context"
	"fmt"

	"github.com/troupe-rl/troupe/internal/report"
)

func init() {
	register(&command{
		name:    "report",
		args:    "RUN [RUN...] [--out FILE]",
		summary: "write a self-contained HTML report (and PNG plots) of one run or a comparison of several",
		detail: `RUN is a run folder (runs/<name>) with metrics.jsonl, config.yaml and/or trajectories/.
One run: writes RUN/report.html and RUN/plots/*.png — evaluation success (overall, by role
and turn), reward mean ± std by role and turn, zero-variance group fraction, loss, entropy,
clip fraction, KL, importance ratio, gradient norm, learning rate, tokens/s, wall time per
phase, completion length and parse failures by role, automatic diagnostics (entropy collapse,
zero-variance groups, large clip fraction, growing KL, format failures, truncation), the
evaluation table, a successful and a failed transcript, and the config.
Several runs: one report with every curve overlaid (one line per run) and an ablation table
of final results; default FILE is compare.html next to the first run.
The HTML embeds its images and styles and loads nothing, so it opens offline.
A missing or unreadable run folder exits with code 2.`,
		run: runReport,
	})
}

// reportPlotScale is report.Options.PlotScale; tests lower it to keep the
// rasterising fast under -race.
var reportPlotScale float64

func runReport(ctx context.Context, env *cliEnv, args []string) error {
	c := commands["report"]
	fs := newFlags(env, c)
	out := fs.String("out", "", "HTML file to write (default RUN/report.html, or compare.html next to the first run)")
	pos, err := parseFlags(env, c, fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("missing RUN")
	}
	res, err := report.Write(ctx, pos, report.Options{Out: *out, PlotScale: reportPlotScale})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "report: %s (%d plots)\n", res.HTML, len(res.Plots))
	for _, r := range res.Runs {
		for _, ch := range report.Diagnose(r) {
			if ch.Level == "warn" {
				fmt.Fprintf(env.stdout, "  warning [%s]: %s\n", r.Name, ch.Text)
			}
		}
	}
	return nil
}
