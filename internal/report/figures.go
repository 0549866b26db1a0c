package report

import (
	"fmt"
	"math"
	"slices"
)

// policyNames returns every policy name in the run's training records.
func policyNames(tr []TrainRecord) []string {
	set := map[string]bool{}
	for _, t := range tr {
		for n := range t.Policies {
			set[n] = true
		}
	}
	return sortedKeys(set)
}

// perPolicy returns one series per policy of get over steps.
func perPolicy(tr []TrainRecord, get func(PolicyRecord) float64) []Series {
	var out []Series
	for _, name := range policyNames(tr) {
		s := Series{Label: name}
		for _, t := range tr {
			if p, ok := t.Policies[name]; ok {
				s.X = append(s.X, float64(t.Step))
				s.Y = append(s.Y, get(p))
			}
		}
		out = append(out, s)
	}
	return out
}

// policyMean is the token-weighted mean of get over a step's policies.
func policyMean(t TrainRecord, get func(PolicyRecord) float64) (float64, bool) {
	var sum, w float64
	for _, p := range t.Policies {
		wt := float64(max(p.Tokens, 1))
		sum += wt * get(p)
		w += wt
	}
	if w == 0 {
		return 0, false
	}
	return sum / w, true
}

func trainSeries(label string, tr []TrainRecord, get func(TrainRecord) (float64, bool)) Series {
	s := Series{Label: label}
	for _, t := range tr {
		if v, ok := get(t); ok {
			s.X = append(s.X, float64(t.Step))
			s.Y = append(s.Y, v)
		}
	}
	return s
}

func always(f func(TrainRecord) float64) func(TrainRecord) (float64, bool) {
	return func(t TrainRecord) (float64, bool) { return f(t), true }
}

// rewardBands returns mean ± std series per key of the step's reward
// statistics (by role or by turn).
func rewardBands[K int | string](tr []TrainRecord, stats func(TrainRecord) map[K]rewardStat, label func(K) string) []Series {
	keys := map[K]bool{}
	for _, t := range tr {
		for k := range stats(t) {
			keys[k] = true
		}
	}
	var out []Series
	for _, k := range sortedKeys(keys) {
		s := Series{Label: label(k)}
		for _, t := range tr {
			st, ok := stats(t)[k]
			if !ok || st.N == 0 {
				continue
			}
			s.X = append(s.X, float64(t.Step))
			s.Y = append(s.Y, st.Mean)
			s.Lo = append(s.Lo, st.Mean-st.Std)
			s.Hi = append(s.Hi, st.Mean+st.Std)
		}
		out = append(out, s)
	}
	return out
}

type rewardStat struct {
	N         int
	Mean, Std float64
}

func byRole(t TrainRecord) map[string]rewardStat {
	m := map[string]rewardStat{}
	for k, v := range t.Groups.ByRole {
		m[k] = rewardStat{v.N, v.Mean, v.Std}
	}
	return m
}

func byTurn(t TrainRecord) map[int]rewardStat {
	m := map[int]rewardStat{}
	for k, v := range t.Groups.ByTurn {
		m[k] = rewardStat{v.N, v.Mean, v.Std}
	}
	return m
}

// iterSeries returns one series per key over the run's trajectory
// iterations of split.
func iterSeries(its []IterSummary, split string, keys []string, get func(*Summary, string) (float64, bool), label func(string) string) []Series {
	var out []Series
	for _, k := range keys {
		s := Series{Label: label(k)}
		for _, it := range its {
			if it.Split != split {
				continue
			}
			if v, ok := get(it.Summary, k); ok {
				s.X = append(s.X, float64(it.Iteration))
				s.Y = append(s.Y, v)
			}
		}
		if len(s.X) > 0 {
			out = append(out, s)
		}
	}
	return out
}

func iterRoles(its []IterSummary) []string {
	set := map[string]bool{}
	for _, it := range its {
		for r := range it.RewardByRole {
			set[r] = true
		}
	}
	return sortedKeys(set)
}

func iterSplits(its []IterSummary) []string {
	set := map[string]bool{}
	for _, it := range its {
		set[it.Split] = true
	}
	return sortedKeys(set)
}

func meanOf(m map[string]*Mean, k string) (float64, bool) {
	if v := m[k]; v != nil && v.N > 0 {
		return v.Value(), true
	}
	return 0, false
}

// runFigures returns the figures of a single-run report.
func runFigures(r *Run) []*Figure {
	tr := r.Metrics.Train
	ev := r.Metrics.Eval
	var figs []*Figure
	// Evaluation.
	{
		f := &Figure{Name: "eval_success", Title: "Evaluation success rate (pass@1)", XLabel: "learner step", IntX: true, YLabel: "success rate (fraction)",
			YFixed: true, YMin: 0, YMax: 1, Note: "Overall pass@1 and cumulative success by turn (solved within t+1 turns) on the validation problems."}
		s := Series{Label: "pass@1"}
		turns := map[int]bool{}
		for _, e := range ev {
			s.X = append(s.X, float64(e.Step))
			s.Y = append(s.Y, e.SuccessRate)
			for t := range e.SuccessByTurn {
				turns[t] = true
			}
		}
		f.Series = append(f.Series, s)
		for _, t := range sortedKeys(turns) {
			ts := Series{Label: fmt.Sprintf("solved by turn %d", t), Dashed: true}
			for _, e := range ev {
				if v, ok := e.SuccessByTurn[t]; ok {
					ts.X = append(ts.X, float64(e.Step))
					ts.Y = append(ts.Y, v)
				}
			}
			f.Series = append(f.Series, ts)
		}
		figs = append(figs, f)
	}
	{
		f := &Figure{Name: "eval_success_by_role", Title: "Evaluation success by closing role", XLabel: "learner step", IntX: true, YLabel: "fraction of episodes",
			YFixed: true, YMin: 0, YMax: 1, Note: "Fraction of evaluation episodes whose success came on a step of each role (sums to the success rate); format-valid rate of all evaluation steps dashed."}
		roles := map[string]bool{}
		for _, e := range ev {
			for k := range e.SuccessByRole {
				roles[k] = true
			}
		}
		for _, role := range sortedKeys(roles) {
			s := Series{Label: role}
			for _, e := range ev {
				s.X = append(s.X, float64(e.Step))
				s.Y = append(s.Y, e.SuccessByRole[role])
			}
			f.Series = append(f.Series, s)
		}
		if len(ev) > 0 {
			s := Series{Label: "format ok", Dashed: true}
			for _, e := range ev {
				s.X = append(s.X, float64(e.Step))
				s.Y = append(s.Y, e.FormatOKRate)
			}
			f.Series = append(f.Series, s)
		}
		figs = append(figs, f)
	}
	// Rewards.
	figs = append(figs,
		&Figure{Name: "reward_by_role", Title: "Training reward by role (mean ± std)", XLabel: "learner step", IntX: true, YLabel: "mixed reward",
			Series: rewardBands(tr, byRole, func(k string) string { return k }), Note: "Mixed reward α·team + (1−α)·local of the batch's rows; band = ±1 std."},
		&Figure{Name: "reward_by_turn", Title: "Training reward by turn (mean ± std)", XLabel: "learner step", IntX: true, YLabel: "mixed reward",
			Series: rewardBands(tr, byTurn, func(k int) string { return fmt.Sprintf("turn %d", k) })},
		&Figure{Name: "zero_variance", Title: "Zero-variance AT-GRPO groups", XLabel: "learner step", IntX: true, YLabel: "fraction of groups (size ≥ 2)",
			YFixed: true, YMin: 0, YMax: 1, Series: []Series{trainSeries("zero-variance fraction", tr, always(func(t TrainRecord) float64 { return t.Groups.ZeroVarianceFrac }))},
			Note: "Groups whose K samples all got the same reward carry no gradient; near 1 means no learning signal."},
	)
	// Rollout success from the trajectories.
	if len(r.Iters) > 0 {
		f := &Figure{Name: "rollout_success", Title: "Rollout episode success (from trajectories)", XLabel: "iteration", IntX: true, YLabel: "success rate (fraction)", YFixed: true, YMin: 0, YMax: 1}
		for _, split := range iterSplits(r.Iters) {
			s := Series{Label: orNone(split)}
			for _, it := range r.Iters {
				if it.Split == split {
					s.X = append(s.X, float64(it.Iteration))
					s.Y = append(s.Y, it.SuccessRate())
				}
			}
			f.Series = append(f.Series, s)
		}
		figs = append(figs, f)
	}
	// Optimisation.
	figs = append(figs,
		&Figure{Name: "loss", Title: "Policy loss", XLabel: "learner step", IntX: true, YLabel: "loss (token mean)", Series: perPolicy(tr, func(p PolicyRecord) float64 { return p.Loss })},
		&Figure{Name: "entropy", Title: "Policy entropy", XLabel: "learner step", IntX: true, YLabel: "entropy (nats / token)", Series: perPolicy(tr, func(p PolicyRecord) float64 { return p.Entropy }),
			Note: "A fast fall towards 0 is entropy collapse: the policy stops exploring."},
		&Figure{Name: "clip_fraction", Title: "PPO clip fraction", XLabel: "learner step", IntX: true, YLabel: "fraction of tokens clipped", Series: perPolicy(tr, func(p PolicyRecord) float64 { return p.ClipFrac })},
		&Figure{Name: "kl", Title: "KL to the base model (k3)", XLabel: "learner step", IntX: true, YLabel: "KL (nats / token)", Series: perPolicy(tr, func(p PolicyRecord) float64 { return p.KL })},
		&Figure{Name: "ratio", Title: "Importance ratio π/π_old", XLabel: "learner step", IntX: true, YLabel: "ratio", Series: ratioSeries(tr)},
		&Figure{Name: "grad_norm", Title: "Gradient norm (before clipping)", XLabel: "learner step", IntX: true, YLabel: "global L2 norm", Series: perPolicy(tr, func(p PolicyRecord) float64 { return p.GradNorm })},
		&Figure{Name: "lr", Title: "Learning rate", XLabel: "learner step", IntX: true, YLabel: "learning rate", Series: perPolicy(tr, func(p PolicyRecord) float64 { return p.LR })},
		&Figure{Name: "tokens_per_sec", Title: "Learner throughput", XLabel: "learner step", IntX: true, YLabel: "tokens / s",
			Series: []Series{
				trainSeries("completion tokens/s", tr, always(func(t TrainRecord) float64 { return t.TokensPerSec })),
				trainSeries("padded tokens/s", tr, always(func(t TrainRecord) float64 { return t.PaddedPerSec })),
			}},
		wallFigure(r),
	)
	// Trajectory statistics.
	if len(r.Iters) > 0 {
		roles := iterRoles(r.Iters)
		var length, bad []Series
		for _, split := range iterSplits(r.Iters) {
			lab := func(role string) string {
				if split == "" || split == "train" {
					return role
				}
				return role + " (" + split + ")"
			}
			length = append(length, iterSeries(r.Iters, split, roles, func(s *Summary, k string) (float64, bool) { return meanOf(s.TokensByRole, k) }, lab)...)
			bad = append(bad, iterSeries(r.Iters, split, roles, func(s *Summary, k string) (float64, bool) { return meanOf(s.BadByRole, k) }, lab)...)
		}
		trunc := Series{Label: "finish = length", Dashed: true}
		for _, it := range r.Iters {
			if it.Split == "train" || it.Split == "" {
				trunc.X = append(trunc.X, float64(it.Iteration))
				trunc.Y = append(trunc.Y, float64(it.FinishReasons["length"])/float64(max(it.Rows, 1)))
			}
		}
		figs = append(figs,
			&Figure{Name: "completion_length", Title: "Completion length by role", XLabel: "iteration", IntX: true, YLabel: "mean completion tokens", Series: length},
			&Figure{Name: "format_failures", Title: "Format / parse failures by role", XLabel: "iteration", IntX: true, YLabel: "fraction of rows (verdict ≠ ok)",
				YFixed: true, YMin: 0, YMax: 1, Series: append(bad, trunc), Note: "Rows whose env verdict is not \"ok\", per role; “finish = length” is the fraction of train completions cut at max_tokens."},
		)
	}
	return figs
}

func ratioSeries(tr []TrainRecord) []Series {
	var out []Series
	for _, s := range perPolicy(tr, func(p PolicyRecord) float64 { return p.RatioMean }) {
		s.Label += " mean"
		out = append(out, s)
	}
	for _, s := range perPolicy(tr, func(p PolicyRecord) float64 { return p.RatioMax }) {
		s.Label += " max"
		s.Dashed = true
		out = append(out, s)
	}
	return out
}

// wallFigure plots the wall time per phase and iteration from phase
// records, or else the learner's step time and the evaluations' wall time.
func wallFigure(r *Run) *Figure {
	f := &Figure{Name: "wall_time", Title: "Wall time per phase", YLabel: "seconds"}
	if ph := r.Metrics.Phases; len(ph) > 0 {
		f.XLabel, f.IntX = "iteration", true
		names := map[string]bool{}
		for _, p := range ph {
			for k := range p.Seconds {
				names[k] = true
			}
		}
		for _, n := range sortedKeys(names) {
			s := Series{Label: n}
			for _, p := range ph {
				if v, ok := p.Seconds[n]; ok {
					s.X = append(s.X, float64(p.Iteration))
					s.Y = append(s.Y, v)
				}
			}
			f.Series = append(f.Series, s)
		}
		return f
	}
	f.XLabel, f.IntX = "learner step", true
	f.Series = append(f.Series, trainSeries("learn step", r.Metrics.Train, always(func(t TrainRecord) float64 { return t.Seconds })))
	ev := Series{Label: "eval"}
	for _, e := range r.Metrics.Eval {
		ev.X = append(ev.X, float64(e.Step))
		ev.Y = append(ev.Y, e.WallSeconds)
	}
	f.Series = append(f.Series, ev)
	f.Note = "No phase records in metrics.jsonl: showing the learner's step time and each evaluation's wall time."
	return f
}

// overlayFigures returns the figures comparing several runs, one line per
// run.
func overlayFigures(runs []*Run) []*Figure {
	type spec struct {
		name, title, xlabel, ylabel string
		fixed                       bool
		series                      func(r *Run) Series
	}
	evalS := func(get func(EvalRecord) float64) func(r *Run) Series {
		return func(r *Run) Series {
			var s Series
			for _, e := range r.Metrics.Eval {
				s.X = append(s.X, float64(e.Step))
				s.Y = append(s.Y, get(e))
			}
			return s
		}
	}
	trainS := func(get func(TrainRecord) (float64, bool)) func(r *Run) Series {
		return func(r *Run) Series { return trainSeries("", r.Metrics.Train, get) }
	}
	polS := func(get func(PolicyRecord) float64) func(r *Run) Series {
		return trainS(func(t TrainRecord) (float64, bool) { return policyMean(t, get) })
	}
	iterS := func(get func(*Summary) float64) func(r *Run) Series {
		return func(r *Run) Series {
			var s Series
			for _, it := range r.Iters {
				if it.Split == "train" || it.Split == "" {
					s.X = append(s.X, float64(it.Iteration))
					s.Y = append(s.Y, get(it.Summary))
				}
			}
			return s
		}
	}
	specs := []spec{
		{"eval_success", "Evaluation success rate (pass@1)", "learner step", "success rate (fraction)", true, evalS(func(e EvalRecord) float64 { return e.SuccessRate })},
		{"eval_reward", "Evaluation reward", "learner step", "mean mixed reward", false, evalS(func(e EvalRecord) float64 { return e.RewardMean })},
		{"reward", "Training reward", "learner step", "mean mixed reward", false, trainS(always(func(t TrainRecord) float64 { return t.Groups.Reward.Mean }))},
		{"zero_variance", "Zero-variance AT-GRPO groups", "learner step", "fraction of groups", true, trainS(always(func(t TrainRecord) float64 { return t.Groups.ZeroVarianceFrac }))},
		{"rollout_success", "Rollout success (train split)", "iteration", "success rate (fraction)", true, iterS(func(s *Summary) float64 { return s.SuccessRate() })},
		{"loss", "Policy loss", "learner step", "loss (token mean)", false, polS(func(p PolicyRecord) float64 { return p.Loss })},
		{"entropy", "Policy entropy", "learner step", "entropy (nats / token)", false, polS(func(p PolicyRecord) float64 { return p.Entropy })},
		{"clip_fraction", "PPO clip fraction", "learner step", "fraction of tokens clipped", false, polS(func(p PolicyRecord) float64 { return p.ClipFrac })},
		{"kl", "KL to the base model (k3)", "learner step", "KL (nats / token)", false, polS(func(p PolicyRecord) float64 { return p.KL })},
		{"grad_norm", "Gradient norm (before clipping)", "learner step", "global L2 norm", false, polS(func(p PolicyRecord) float64 { return p.GradNorm })},
		{"tokens_per_sec", "Learner throughput", "learner step", "completion tokens / s", false, trainS(always(func(t TrainRecord) float64 { return t.TokensPerSec }))},
		{"step_seconds", "Learner step time", "learner step", "seconds", false, trainS(always(func(t TrainRecord) float64 { return t.Seconds }))},
		{"completion_length", "Completion length (train split)", "iteration", "mean completion tokens", false, iterS(func(s *Summary) float64 { return s.CompletionTokens.Value() })},
		{"format_failures", "Format / parse failures (train split)", "iteration", "fraction of rows (verdict ≠ ok)", true, iterS(func(s *Summary) float64 { return s.FormatFailRate() })},
	}
	var figs []*Figure
	for _, sp := range specs {
		f := &Figure{Name: sp.name, Title: sp.title, XLabel: sp.xlabel, YLabel: sp.ylabel, YFixed: sp.fixed, YMin: 0, YMax: 1, IntX: true}
		for _, r := range runs {
			s := sp.series(r)
			s.Label = r.Name
			f.Series = append(f.Series, s)
		}
		figs = append(figs, f)
	}
	return figs
}

// Check is one automatic diagnosis of a run.
type Check struct {
	Level string // "warn" or "ok"
	Text  string
}

// Diagnose looks for the failure patterns of RL runs in r's metrics:
// missing evaluations, flat success, zero-variance groups, entropy
// collapse, large clip fractions, growing KL, non-finite values, format
// failures and truncated completions.
func Diagnose(r *Run) []Check {
	var out []Check
	warn := func(format string, a ...any) { out = append(out, Check{"warn", fmt.Sprintf(format, a...)}) }
	ok := func(format string, a ...any) { out = append(out, Check{"ok", fmt.Sprintf(format, a...)}) }
	tr, ev := r.Metrics.Train, r.Metrics.Eval
	switch {
	case len(ev) == 0:
		warn("No evaluation records in %s: success cannot be judged.", MetricsName)
	case len(ev) == 1:
		ok("One evaluation: pass@1 %s.", pct(ev[0].SuccessRate))
	default:
		first, last := ev[0], ev[len(ev)-1]
		best := slices.MaxFunc(ev, func(a, b EvalRecord) int { return cmpF(a.SuccessRate, b.SuccessRate) })
		if last.SuccessRate <= first.SuccessRate {
			warn("Evaluation success did not improve: %s at step %d → %s at step %d (best %s at step %d).",
				pct(first.SuccessRate), first.Step, pct(last.SuccessRate), last.Step, pct(best.SuccessRate), best.Step)
		} else {
			ok("Evaluation success rose from %s (step %d) to %s (step %d); best %s at step %d.",
				pct(first.SuccessRate), first.Step, pct(last.SuccessRate), last.Step, pct(best.SuccessRate), best.Step)
		}
	}
	if len(tr) == 0 {
		warn("No training steps in %s.", MetricsName)
		return out
	}
	tail := tr[max(0, len(tr)-max(1, len(tr)/5)):] // last fifth
	var zv Mean
	for _, t := range tail {
		zv.Add(t.Groups.ZeroVarianceFrac)
	}
	if zv.Value() > 0.5 {
		warn("%s of AT-GRPO groups have zero reward variance over the last %d step(s): little learning signal (problems too hard or too easy, too few branches, or a saturated reward).",
			pct(zv.Value()), len(tail))
	}
	for _, name := range policyNames(tr) {
		var vals []PolicyRecord
		for _, t := range tr {
			if p, ok := t.Policies[name]; ok {
				vals = append(vals, p)
			}
		}
		if len(vals) == 0 {
			continue
		}
		f, l := vals[0], vals[len(vals)-1]
		if len(vals) >= 3 && f.Entropy > 0 && l.Entropy < 0.3*f.Entropy {
			warn("Policy %s: entropy fell from %.3g to %.3g (entropy collapse: the policy stopped exploring).", name, f.Entropy, l.Entropy)
		}
		var clip Mean
		for _, v := range vals[max(0, len(vals)-len(tail)):] {
			clip.Add(v.ClipFrac)
		}
		if clip.Value() > 0.2 {
			warn("Policy %s: %s of tokens clipped over the last steps: updates too large (lower the learning rate or the epochs per batch).", name, pct(clip.Value()))
		}
		if len(vals) >= 3 && l.KL > 0.1 && l.KL > 5*math.Max(f.KL, 1e-9) {
			warn("Policy %s: KL to the base model grew from %.3g to %.3g.", name, f.KL, l.KL)
		}
		for _, v := range vals {
			if bad(v.Loss) || bad(v.GradNorm) || bad(v.Entropy) || bad(v.KL) {
				warn("Policy %s: non-finite loss, gradient norm, entropy or KL.", name)
				break
			}
		}
	}
	var last *IterSummary
	for i := range r.Iters {
		if r.Iters[i].Split == "train" || r.Iters[i].Split == "" {
			last = &r.Iters[i]
		}
	}
	if last != nil && last.Rows > 0 {
		if fr := last.FormatFailRate(); fr > 0.3 {
			warn("Iteration %d: %s of completions failed the env's format/parse check (verdicts: %s).", last.Iteration, pct(fr), countList(last.Verdicts, last.Rows))
		}
		if tl := float64(last.FinishReasons["length"]) / float64(last.Rows); tl > 0.2 {
			warn("Iteration %d: %s of completions hit max_tokens (finish_reason = length).", last.Iteration, pct(tl))
		}
	}
	if len(out) == 0 || !slices.ContainsFunc(out, func(c Check) bool { return c.Level == "warn" }) {
		ok("No warning signs in the training metrics.")
	}
	return out
}

func bad(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
