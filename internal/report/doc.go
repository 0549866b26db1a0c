// Package report turns a run folder into something a person can read:
// `troupe report` writes a self-contained HTML page with PNG plots, and
// `troupe replay` prints stored episodes as text transcripts.
//
// # Run folder
//
// A run folder runs/<name>/ holds:
//
//   - metrics.jsonl: one JSON object per line. A line without "type" (or
//     with "type": "train") is a learner step ([TrainRecord], written by
//     learner.MetricsWriter); "type": "eval" is an evaluation
//     ([EvalRecord]); "type": "phases" is one iteration's wall time per
//     phase ([PhaseRecord]). Unknown fields are ignored, lines of unknown
//     types skipped, and a torn last line (a writer killed mid-write) is
//     skipped; any other bad line is an error naming the file and line.
//   - config.yaml: the resolved experiment config (shown flattened).
//   - trajectories/: the Parquet shards (see learner/trajectory), for
//     rollout success, completion length, parse failures and transcripts.
//
// The experiment driver appends evaluations with [AppendEval] (computing
// the record from the eval split's rows with [EvalFromSteps]) and phase
// timings with [AppendPhases], then calls [Write].
//
// # Report
//
// [Write] with one run writes RUN/report.html and RUN/plots/*.png; with
// several runs an overlay report (one line per run and an ablation table of
// final results). The HTML embeds every image as a data: URI and has inline
// CSS and no scripts, so it opens offline and can be mailed as one file.
// Plots are drawn with gonum.org/v1/plot (pure Go).
//
// The package lives under internal/ because only troupe's own commands use
// it; the on-disk formats it reads are the contract, not its Go API.
package report
