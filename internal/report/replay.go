package report

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/troupe-rl/troupe/learner/trajectory"
)

// ReplayOptions select and format what [Replay] prints.
type ReplayOptions struct {
	// Show is how many episodes are printed in full (0 = summary only).
	Show int
	// Role and Turn keep only the steps of that role / turn (Turn < 0 =
	// all); an episode is kept when any of its steps is.
	Role string
	Turn int
	// Success keeps successful (true) or failed (false) episodes; nil = both.
	Success *bool
	// Episode keeps only the episode with this id.
	Episode string
	// Split keeps only rows of this split ("" = all).
	Split string
	// Prompts prints each step's prompt before its completion.
	Prompts bool
	// Branches prints every branch's completion, not only the chosen one.
	Branches bool
}

// Replay reads the shard (or trajectories folder) at path and prints the
// first opts.Show matching episodes as transcripts, then summary statistics
// over every matching episode.
func Replay(ctx context.Context, w io.Writer, path string, opts ReplayOptions) error {
	paths, err := ShardPaths(path)
	if err != nil {
		return err
	}
	cols := []string{trajectory.ColCompletionIDs}
	for _, c := range trajectory.ReplayColumns {
		if c != trajectory.ColPromptText || opts.Prompts {
			cols = append(cols, c)
		}
	}
	rows, err := ReadSteps(ctx, paths, &trajectory.ReadOptions{Columns: cols, Split: opts.Split})
	if err != nil {
		return err
	}
	eps := FilterEpisodes(GroupEpisodes(rows), opts)
	fmt.Fprintf(w, "%s: %d shard(s), %d rows, %d matching episodes\n", path, len(paths), len(rows), len(eps))
	for i, ep := range eps {
		if i >= opts.Show {
			break
		}
		fmt.Fprintln(w)
		WriteTranscript(w, ep, opts.Prompts, opts.Branches)
	}
	fmt.Fprintln(w)
	WriteSummary(w, Summarize(eps), describeFilters(opts))
	return nil
}

// FilterEpisodes applies opts' episode and step filters. Episode success is
// decided before the role/turn filters drop steps.
func FilterEpisodes(eps []*Episode, opts ReplayOptions) []*Episode {
	var out []*Episode
	for _, ep := range eps {
		if opts.Episode != "" && ep.ID != opts.Episode {
			continue
		}
		if opts.Success != nil && ep.Success != *opts.Success {
			continue
		}
		if opts.Role != "" || opts.Turn >= 0 {
			var steps []trajectory.Step
			for _, s := range ep.Steps {
				if (opts.Role == "" || s.Role == opts.Role) && (opts.Turn < 0 || int(s.Turn) == opts.Turn) {
					steps = append(steps, s)
				}
			}
			if len(steps) == 0 {
				continue
			}
			cp := *ep
			cp.Steps = steps
			ep = &cp
		}
		out = append(out, ep)
	}
	return out
}

func describeFilters(o ReplayOptions) string {
	var f []string
	if o.Split != "" {
		f = append(f, "split="+o.Split)
	}
	if o.Episode != "" {
		f = append(f, "episode="+o.Episode)
	}
	if o.Success != nil {
		f = append(f, map[bool]string{true: "successful", false: "failed"}[*o.Success])
	}
	if o.Role != "" {
		f = append(f, "role="+o.Role)
	}
	if o.Turn >= 0 {
		f = append(f, fmt.Sprintf("turn=%d", o.Turn))
	}
	return strings.Join(f, ", ")
}

// WriteTranscript prints one episode: a header, then per step of the
// chosen path its role, turn, branch, rewards, verdict and completion
// (with the prompt when prompts is set). Sibling branches get one line
// each, or their full completions when branches is set.
func WriteTranscript(w io.Writer, ep *Episode, prompts, branches bool) {
	status := "FAILED"
	if ep.Success {
		status = "SUCCESS"
	}
	fmt.Fprintf(w, "=== episode %s | problem %s | env %s | split %s | iteration %d | %s | %d turn(s), %d row(s)\n",
		ep.ID, ep.ProblemID, ep.Env, ep.Split, ep.Iteration, status, ep.Turns(), len(ep.Steps))
	type key struct {
		turn int32
		role string
	}
	var keys []key
	groups := map[key][]trajectory.Step{}
	for _, s := range ep.Steps {
		k := key{s.Turn, s.Role}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], s)
	}
	for _, k := range keys {
		g := groups[k]
		ci := slices.IndexFunc(g, func(s trajectory.Step) bool { return s.Chosen })
		if ci < 0 {
			ci = 0
		}
		for i, s := range g {
			if i != ci && !branches {
				continue
			}
			writeStep(w, s, len(g), prompts)
		}
		if !branches && len(g) > 1 {
			var parts []string
			for i, s := range g {
				if i == ci {
					continue
				}
				parts = append(parts, fmt.Sprintf("b%d reward %s %s %q", s.Branch, fmtF(s.Reward), Verdict(s.Info), Shorten(s.CompletionText, 40)))
			}
			fmt.Fprintf(w, "    other branches: %s\n", strings.Join(parts, " | "))
		}
	}
}

func writeStep(w io.Writer, s trajectory.Step, k int, prompts bool) {
	chosen := ""
	if s.Chosen {
		chosen = " (chosen)"
	}
	fmt.Fprintf(w, "--- turn %d | %s | branch %d/%d%s | reward %s (local %s, team %s) | verdict %s | finish %s | %d tokens\n",
		s.Turn, s.Role, s.Branch, k, chosen, fmtF(s.Reward), fmtF(s.RewardLocal), fmtF(s.RewardTeam),
		Verdict(s.Info), orNone(s.FinishReason), len(s.CompletionIDs))
	if extra := infoExtras(s.Info); extra != "" {
		fmt.Fprintf(w, "    info: %s\n", extra)
	}
	if prompts {
		fmt.Fprintf(w, "    [prompt]\n%s\n", indent(s.PromptText, "    | "))
	}
	fmt.Fprintf(w, "    [completion]\n%s\n", indent(s.CompletionText, "    > "))
}

// infoExtras renders the info object without its verdict, keys sorted,
// shortened to one line.
func infoExtras(info string) string {
	if info == "" {
		return ""
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(info), &m); err != nil {
		return Shorten(info, 160)
	}
	delete(m, "verdict")
	if len(m) == 0 {
		return ""
	}
	b, _ := json.Marshal(m) // maps marshal with sorted keys
	return Shorten(string(b), 160)
}

// WriteSummary prints the statistics of s; filters describes what was
// selected ("" = everything).
func WriteSummary(w io.Writer, s *Summary, filters string) {
	if filters != "" {
		filters = " (" + filters + ")"
	}
	fmt.Fprintf(w, "=== summary%s\n", filters)
	fmt.Fprintf(w, "episodes:          %d, success %s (%d/%d)\n", s.Episodes, pct(s.SuccessRate()), s.Successes, s.Episodes)
	fmt.Fprintf(w, "rows:              %d\n", s.Rows)
	if s.Rows == 0 {
		return
	}
	fmt.Fprintf(w, "reward:            mixed %s, local %s, team %s\n", fmtF(s.Reward.Value()), fmtF(s.RewardLocal.Value()), fmtF(s.RewardTeam.Value()))
	var parts []string
	for _, r := range sortedKeys(s.RewardByRole) {
		parts = append(parts, fmt.Sprintf("%s %s (n=%d)", r, fmtF(s.RewardByRole[r].Value()), s.RewardByRole[r].N))
	}
	fmt.Fprintf(w, "reward by role:    %s\n", strings.Join(parts, ", "))
	parts = parts[:0]
	for _, t := range sortedKeys(s.RewardByTurn) {
		parts = append(parts, fmt.Sprintf("t%d %s (n=%d)", t, fmtF(s.RewardByTurn[t].Value()), s.RewardByTurn[t].N))
	}
	fmt.Fprintf(w, "reward by turn:    %s\n", strings.Join(parts, ", "))
	fmt.Fprintf(w, "completion length: mean %.1f tokens, %.1f chars\n", s.CompletionTokens.Value(), s.CompletionChars.Value())
	parts = parts[:0]
	for _, r := range sortedKeys(s.TokensByRole) {
		parts = append(parts, fmt.Sprintf("%s %.1f", r, s.TokensByRole[r].Value()))
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "tokens by role:    %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "finish reasons:    %s\n", countList(s.FinishReasons, s.Rows))
	fmt.Fprintf(w, "verdicts:          %s\n", countList(s.Verdicts, s.Rows))
	parts = parts[:0]
	for _, r := range sortedKeys(s.BadByRole) {
		parts = append(parts, fmt.Sprintf("%s %s", r, pct(s.BadByRole[r].Value())))
	}
	fmt.Fprintf(w, "parse failures:    %s of rows; by role %s\n", pct(s.FormatFailRate()), strings.Join(parts, ", "))
}

// countList renders counts as "k n (p%)" sorted by count descending, then key.
func countList(m map[string]int, total int) string {
	keys := sortedKeys(m)
	slices.SortStableFunc(keys, func(a, b string) int { return m[b] - m[a] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d (%s)", k, m[k], pct(float64(m[k])/float64(max(total, 1))))
	}
	return strings.Join(parts, ", ")
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func fmtF(x float64) string { return fmt.Sprintf("%.3g", x) }

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func indent(s, prefix string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return prefix + "(empty)"
	}
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// Shorten returns s on one line, cut to at most n runes with an ellipsis.
func Shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
