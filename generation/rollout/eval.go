package rollout

import (
	"context"
	"sort"
	"sync"

	"github.com/troupe-rl/troupe/learner/trajectory"
)

// Evaluate plays every seed samples times in no_tree mode (whatever
// d.Config.Mode says) and returns the rows of every completed episode,
// ordered by episode and step, with the run summary. Scoring the rows
// (pass@1, success by turn and role) is internal/report.EvalFromSteps.
func (d *Driver) Evaluate(ctx context.Context, iteration int64, seeds []int64, samples int) ([]trajectory.Step, *Summary, error) {
	ed := *d
	ed.Config.Mode = ModeNoTree
	ed.Config.Branches = samples
	var mu sync.Mutex
	var rows []trajectory.Step
	sum, err := ed.Run(ctx, iteration, seeds, func(steps []trajectory.Step) error {
		mu.Lock()
		rows = append(rows, steps...)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, sum, err
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].EpisodeID < rows[j].EpisodeID })
	return rows, sum, nil
}
