package report

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/troupe-rl/troupe/internal/atomicfile"
)

// Options say where a report goes.
type Options struct {
	// Out is the HTML file. Default: RUN/report.html for one run,
	// PARENT/compare.html for several (PARENT = the first run's parent).
	Out string
	// PlotsDir receives the PNGs. Default: "plots" next to Out for one
	// run, OUT-without-.html + "-plots" for several.
	PlotsDir string
	// Now stamps the report (zero = time.Now); tests fix it.
	Now time.Time
	// PlotScale multiplies the PNGs' resolution (0 = 1: 900×420 pixels);
	// the layout stays the same.
	PlotScale float64
}

// Result lists what [Write] wrote.
type Result struct {
	HTML  string
	Plots []string
	Runs  []*Run
}

// Write loads the run folders and writes one report: for one run its
// report (curves, diagnostics, evaluation table, transcripts, config), for
// several an overlay comparing them (curves overlaid and a table of final
// results per run). Errors about a run folder name it and report
// BadInput.
func Write(ctx context.Context, runDirs []string, opts Options) (*Result, error) {
	if len(runDirs) == 0 {
		return nil, errors.New("report: no run folder")
	}
	runs := make([]*Run, len(runDirs))
	for i, d := range runDirs {
		r, err := LoadRun(ctx, d)
		if err != nil {
			return nil, err
		}
		runs[i] = r
	}
	if len(runs) > 1 {
		seen := map[string]int{}
		for _, r := range runs {
			seen[r.Name]++
		}
		for _, r := range runs {
			if seen[r.Name] > 1 { // same name in two places: use the path
				r.Name = filepath.Clean(r.Dir)
			}
		}
	}
	out := opts.Out
	if out == "" {
		if len(runs) == 1 {
			out = filepath.Join(runDirs[0], "report.html")
		} else {
			out = filepath.Join(filepath.Dir(filepath.Clean(runDirs[0])), "compare.html")
		}
	}
	plots := opts.PlotsDir
	if plots == "" {
		if len(runs) == 1 {
			plots = filepath.Join(filepath.Dir(out), "plots")
		} else {
			plots = strings.TrimSuffix(out, filepath.Ext(out)) + "-plots"
		}
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	var figs []*Figure
	if len(runs) == 1 {
		figs = runFigures(runs[0])
	} else {
		figs = overlayFigures(runs)
	}
	var kept []*Figure
	for _, f := range figs {
		if !f.empty() {
			kept = append(kept, f)
		}
	}
	imgs, err := renderAll(ctx, kept, opts.PlotScale)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(plots, 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	res := &Result{HTML: out, Runs: runs}
	page := &page{Generated: now.UTC().Format("2006-01-02 15:04 UTC"), Runs: runs, Compare: len(runs) > 1}
	for i, f := range kept {
		p := filepath.Join(plots, f.Name+".png")
		if err := atomicfile.WriteFile(p, imgs[i], 0o644); err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		res.Plots = append(res.Plots, p)
		page.Figures = append(page.Figures, figView{Figure: f, Src: template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(imgs[i])), File: filepath.Base(p)})
	}
	for _, r := range runs {
		page.Views = append(page.Views, newRunView(r))
	}
	var buf bytes.Buffer
	if err := pageTmpl.Execute(&buf, page); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	if err := atomicfile.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return res, nil
}

// renderAll renders the figures in parallel.
func renderAll(ctx context.Context, figs []*Figure, scale float64) ([][]byte, error) {
	imgs := make([][]byte, len(figs))
	errs := make([]error, len(figs))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, f := range figs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			imgs[i], errs[i] = f.Render(scale)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return imgs, nil
}

type page struct {
	Generated string
	Compare   bool
	Runs      []*Run
	Views     []*runView
	Figures   []figView
}

type figView struct {
	*Figure
	Src  template.URL
	File string
}

// runView is what the template shows of a run.
type runView struct {
	*Run
	Checks      []Check
	Start       *EvalRecord // the evaluation before training (step 0), if any
	Final       *EvalRecord
	Best        *EvalRecord
	Gain        string // final − start pass@1 in percentage points, when both exist
	Steps       int
	Tokens      int
	TrainReward string
	Wall        string
	Transcripts []transcriptView
	ConfigKeys  []KV
}

type transcriptView struct {
	*Episode
	Title    string
	NumTurns int
	Blocks   []turnView
}

type turnView struct {
	Step   stepView
	Others []stepView
}

type stepView struct {
	Turn, Branch          int32
	Role, Verdict, Finish string
	Chosen                bool
	Reward, Local, Team   string
	Tokens                int
	Prompt, Completion    string
	Short                 string
	Info                  string
}

func newRunView(r *Run) *runView {
	v := &runView{Run: r, Checks: Diagnose(r)}
	if ev := r.Metrics.Eval; len(ev) > 0 {
		v.Final = &ev[len(ev)-1]
		v.Best = &ev[0]
		if ev[0].Step == 0 {
			v.Start = &ev[0]
			if len(ev) > 1 {
				v.Gain = fmt.Sprintf("%+.1f", 100*(v.Final.SuccessRate-v.Start.SuccessRate))
			}
		}
		for i := range ev {
			if ev[i].SuccessRate > v.Best.SuccessRate {
				v.Best = &ev[i]
			}
		}
	}
	var wall float64
	for _, t := range r.Metrics.Train {
		v.Steps = max(v.Steps, t.Step)
		v.Tokens += t.Tokens
	}
	if tr := r.Metrics.Train; len(tr) > 0 {
		last := tr[len(tr)-1]
		v.TrainReward = fmt.Sprintf("%.3g ± %.2g", last.Groups.Reward.Mean, last.Groups.Reward.Std)
	}
	if ph := r.Metrics.Phases; len(ph) > 0 {
		for _, p := range ph {
			for _, s := range p.Seconds {
				wall += s
			}
		}
	} else {
		for _, t := range r.Metrics.Train {
			wall += t.Seconds
		}
		for _, e := range r.Metrics.Eval {
			wall += e.WallSeconds
		}
	}
	v.Wall = (time.Duration(wall) * time.Second).String()
	for _, ep := range r.Transcripts {
		title := "Failed episode"
		if ep.Success {
			title = "Successful episode"
		}
		v.Transcripts = append(v.Transcripts, newTranscriptView(ep, title))
	}
	keys := map[string]bool{"name": true, "seed": true, "iterations": true, "env.name": true, "env.mode": true, "env.alpha": true,
		"generation.backend": true, "generation.model": true, "rollout.mode": true, "rollout.branches": true, "rollout.problems": true,
		"learner.policies": true, "learner.lr": true, "learner.lora_rank": true, "learner.loss.kl_coef": true}
	for _, kv := range r.Config {
		if keys[kv.Key] {
			v.ConfigKeys = append(v.ConfigKeys, kv)
		}
	}
	return v
}

func newTranscriptView(ep *Episode, title string) transcriptView {
	tv := transcriptView{Episode: ep, Title: title, NumTurns: ep.Turns()}
	type key struct {
		turn int32
		role string
	}
	var order []key
	idx := map[key]int{}
	for _, s := range ep.Steps {
		k := key{s.Turn, s.Role}
		i, ok := idx[k]
		if !ok {
			i = len(tv.Blocks)
			idx[k] = i
			order = append(order, k)
			tv.Blocks = append(tv.Blocks, turnView{})
		}
		sv := stepView{Turn: s.Turn, Branch: s.Branch, Role: s.Role, Verdict: Verdict(s.Info), Finish: orNone(s.FinishReason), Chosen: s.Chosen,
			Reward: fmtF(s.Reward), Local: fmtF(s.RewardLocal), Team: fmtF(s.RewardTeam), Tokens: len(s.CompletionIDs),
			Prompt: s.PromptText, Completion: s.CompletionText, Short: Shorten(s.CompletionText, 80), Info: infoExtras(s.Info)}
		t := &tv.Blocks[i]
		if s.Chosen && t.Step.Role != "" && !t.Step.Chosen {
			t.Others = append(t.Others, t.Step)
			t.Step = sv
		} else if t.Step.Role == "" {
			t.Step = sv
		} else {
			t.Others = append(t.Others, sv)
		}
	}
	return tv
}

var funcs = template.FuncMap{
	"pct":  pct,
	"fmtF": fmtF,
	"secs": func(s float64) string { return (time.Duration(s*10) * time.Second / 10).String() },
	"add":  func(a, b int) int { return a + b },
}

var pageTmpl = template.Must(template.New("page").Funcs(funcs).Parse(pageHTML))
