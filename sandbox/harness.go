package sandbox

import (
	"context"
	"strings"

	"github.com/sourcegraph/conc/pool"
)

// Case is one stdin/stdout test of a code task.
type Case struct {
	Name  string `json:"name,omitempty"`
	Stdin string `json:"stdin"`
	Want  string `json:"want"` // expected stdout, compared after Normalize
}

// Verdict is a case's outcome: "pass", "wrong_answer", "skipped", or the
// run's Status when the program did not finish normally.
type Verdict string

// The verdicts that are not a Status.
const (
	VerdictPass        Verdict = "pass"
	VerdictWrongAnswer Verdict = "wrong_answer"
	VerdictSkipped     Verdict = "skipped" // not run: an earlier case failed and StopOnFailure was set
)

// CaseResult is the outcome of one case.
type CaseResult struct {
	Name    string  `json:"name,omitempty"`
	Verdict Verdict `json:"verdict"`
	Result  Result  `json:"result"`
}

// Report is the outcome of a program on all its cases.
type Report struct {
	Passed int          `json:"passed"`
	Total  int          `json:"total"`
	Cases  []CaseResult `json:"cases"`
}

// AllPassed reports whether every case passed (false for no cases).
func (r Report) AllPassed() bool { return r.Total > 0 && r.Passed == r.Total }

// Fraction is Passed/Total (0 for no cases): a dense reward.
func (r Report) Fraction() float64 {
	if r.Total == 0 {
		return 0
	}
	return float64(r.Passed) / float64(r.Total)
}

// CaseOptions tune RunCases.
type CaseOptions struct {
	Limits Limits // per case; zero fields take the runner's defaults
	// StopOnFailure runs the cases in order and marks the rest skipped at
	// the first that does not pass.
	StopOnFailure bool
	// Workers bounds concurrent cases when StopOnFailure is false (default:
	// all at once; a *Sandbox bounds them again by Config.Workers).
	Workers int
}

// RunCases runs p once per case with the case's stdin and compares stdout
// with the case's Want after Normalize. p.Stdin is ignored. The error is
// non-nil only when a run could not be judged (see Runner); the report then
// holds the cases judged so far.
func RunCases(ctx context.Context, r Runner, p Program, cases []Case, opt CaseOptions) (Report, error) {
	rep := Report{Total: len(cases), Cases: make([]CaseResult, len(cases))}
	one := func(i int) (bool, error) {
		q := p
		q.Stdin = []byte(cases[i].Stdin)
		res, err := r.Run(ctx, q, opt.Limits)
		cr := CaseResult{Name: cases[i].Name, Result: res}
		switch {
		case err != nil:
			cr.Verdict = VerdictSkipped
		case res.Status != StatusOK:
			cr.Verdict = Verdict(res.Status)
		case Normalize(string(res.Stdout)) == Normalize(cases[i].Want):
			cr.Verdict = VerdictPass
		default:
			cr.Verdict = VerdictWrongAnswer
		}
		rep.Cases[i] = cr
		return cr.Verdict == VerdictPass, err
	}
	if opt.StopOnFailure {
		for i := range cases {
			rep.Cases[i] = CaseResult{Name: cases[i].Name, Verdict: VerdictSkipped}
		}
		for i := range cases {
			ok, err := one(i)
			if err != nil {
				return rep.count(), err
			}
			if !ok {
				break
			}
		}
		return rep.count(), nil
	}
	workers := opt.Workers
	if workers <= 0 {
		workers = max(len(cases), 1)
	}
	errs := make([]error, len(cases))
	pl := pool.New().WithMaxGoroutines(workers)
	for i := range cases {
		pl.Go(func() { _, errs[i] = one(i) })
	}
	pl.Wait()
	for _, err := range errs {
		if err != nil {
			return rep.count(), err
		}
	}
	return rep.count(), nil
}

func (r Report) count() Report {
	r.Passed = 0
	for _, c := range r.Cases {
		if c.Verdict == VerdictPass {
			r.Passed++
		}
	}
	return r
}

// Normalize makes outputs comparable: CRLF becomes LF, runs of spaces and
// tabs inside a line become one space, leading and trailing whitespace of
// each line and trailing empty lines are dropped.
func Normalize(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}

// Job is one program for RunAll.
type Job struct {
	Program Program
	Limits  Limits
}

// JobResult is RunAll's answer for one job.
type JobResult struct {
	Result Result
	Err    error
}

// RunAll runs jobs on r with at most workers at once (≤ 0: all at once; a
// *Sandbox bounds them again by Config.Workers) and returns their results in
// job order.
func RunAll(ctx context.Context, r Runner, jobs []Job, workers int) []JobResult {
	out := make([]JobResult, len(jobs))
	if workers <= 0 {
		workers = max(len(jobs), 1)
	}
	pl := pool.New().WithMaxGoroutines(workers)
	for i, j := range jobs {
		pl.Go(func() {
			res, err := r.Run(ctx, j.Program, j.Limits)
			out[i] = JobResult{Result: res, Err: err}
		})
	}
	pl.Wait()
	return out
}
