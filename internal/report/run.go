package report

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/troupe-rl/troupe/learner/trajectory"
)

// ConfigName is the resolved config's file name in a run folder.
const ConfigName = "config.yaml"

// Run is everything a report shows about one run folder.
type Run struct {
	Name string
	Dir  string
	// Metrics holds the metrics.jsonl records (empty when the file is
	// absent).
	Metrics *Metrics
	// Config is the resolved config flattened to dotted keys in file
	// order; ConfigText the file as is ("" when absent).
	Config     []KV
	ConfigText string
	// Shards are the trajectory shards; Iters their statistics per
	// iteration and split, ordered by iteration then split.
	Shards []string
	Iters  []IterSummary
	// Transcripts are a few episodes shown in full, chosen
	// deterministically: from the latest iteration that has one, the
	// first (by id) successful and the first failed episode.
	Transcripts []*Episode
	// Warnings are problems found while loading that did not stop it.
	Warnings []string
}

// KV is one flattened config entry.
type KV struct{ Key, Value string }

// IterSummary is the trajectory statistics of one iteration's split.
type IterSummary struct {
	Iteration int64
	Split     string
	*Summary
}

// LoadRun reads the run folder dir: metrics.jsonl, config.yaml and the
// shards in trajectories/. A folder with none of them (or that does not
// exist) is an *Error with BadInput true.
func LoadRun(ctx context.Context, dir string) (*Run, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fileErr(dir, err)
	}
	if !st.IsDir() {
		return nil, &Error{Path: dir, Err: errors.New("not a folder (want a run folder runs/<name>)"), Bad: true}
	}
	abs, _ := filepath.Abs(dir)
	r := &Run{Name: filepath.Base(abs), Dir: dir, Metrics: &Metrics{}}
	found := false
	if m, err := ReadMetrics(filepath.Join(dir, MetricsName)); err == nil {
		r.Metrics = m
		found = true
		if m.Skipped > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s: %d line(s) of unknown type or torn were skipped", MetricsName, m.Skipped))
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if data, err := os.ReadFile(filepath.Join(dir, ConfigName)); err == nil {
		found = true
		r.ConfigText = string(data)
		kvs, err := flattenYAML(data)
		if err != nil {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s: %v", ConfigName, err))
		}
		r.Config = kvs
		for _, kv := range kvs {
			if kv.Key == "name" && kv.Value != "" {
				r.Name = kv.Value
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fileErr(filepath.Join(dir, ConfigName), err)
	}
	tdir := filepath.Join(dir, "trajectories")
	if isDir(tdir) {
		paths, err := ShardPaths(tdir)
		var re *Error
		switch {
		case err == nil:
			r.Shards = paths
		case errors.As(err, &re) && re.Bad:
			// An empty trajectories folder is a run that has not rolled out yet.
		default:
			return nil, err
		}
		found = true
	}
	if !found {
		return nil, &Error{Path: dir, Err: fmt.Errorf("not a run folder: no %s, %s or trajectories/", MetricsName, ConfigName), Bad: true}
	}
	if len(r.Shards) > 0 {
		if err := r.loadTrajectories(ctx); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *Run) loadTrajectories(ctx context.Context) error {
	rows, err := ReadSteps(ctx, r.Shards, &trajectory.ReadOptions{Columns: statsColumns})
	if err != nil {
		return err
	}
	eps := GroupEpisodes(rows)
	type key struct {
		it    int64
		split string
	}
	groups := map[key][]*Episode{}
	for _, ep := range eps {
		k := key{ep.Iteration, ep.Split}
		groups[k] = append(groups[k], ep)
	}
	for k, g := range groups {
		r.Iters = append(r.Iters, IterSummary{Iteration: k.it, Split: k.split, Summary: Summarize(g)})
	}
	sort.Slice(r.Iters, func(i, j int) bool {
		if r.Iters[i].Iteration != r.Iters[j].Iteration {
			return r.Iters[i].Iteration < r.Iters[j].Iteration
		}
		return r.Iters[i].Split < r.Iters[j].Split
	})
	// Transcripts: latest iteration with a success / a failure; eps is
	// sorted by iteration then id, so walk it backwards per iteration.
	pick := func(success bool) *Episode {
		var best *Episode
		for _, ep := range eps {
			if ep.Success != success {
				continue
			}
			if best == nil || ep.Iteration > best.Iteration {
				best = ep
			}
		}
		return best
	}
	want := map[string]bool{}
	var its []int64
	for _, ep := range []*Episode{pick(true), pick(false)} {
		if ep != nil {
			want[ep.ID] = true
			its = append(its, ep.Iteration)
		}
	}
	if len(want) == 0 {
		return nil
	}
	var paths []string
	for _, p := range r.Shards {
		it, _, ok := trajectory.ParseShardName(filepath.Base(p))
		if !ok || containsInt(its, it) {
			paths = append(paths, p)
		}
	}
	full, err := ReadSteps(ctx, paths, &trajectory.ReadOptions{Iterations: its})
	if err != nil {
		return err
	}
	var keep []trajectory.Step
	for _, s := range full {
		if want[s.EpisodeID] {
			keep = append(keep, s)
		}
	}
	tr := GroupEpisodes(keep)
	sort.SliceStable(tr, func(i, j int) bool { return tr[i].Success && !tr[j].Success })
	r.Transcripts = tr
	return nil
}

func containsInt(xs []int64, x int64) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// flattenYAML turns a YAML mapping into dotted key/value pairs in file
// order; sequences of scalars print inline.
func flattenYAML(data []byte) ([]KV, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("report: config: %w", err)
	}
	var out []KV
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, prefix)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if prefix != "" {
					k = prefix + "." + k
				}
				walk(n.Content[i+1], k)
			}
		case yaml.SequenceNode:
			var parts []string
			for _, c := range n.Content {
				if c.Kind != yaml.ScalarNode {
					b, _ := yaml.Marshal(c)
					parts = append(parts, strings.TrimSpace(string(b)))
					continue
				}
				parts = append(parts, c.Value)
			}
			out = append(out, KV{prefix, "[" + strings.Join(parts, ", ") + "]"})
		case yaml.AliasNode:
			walk(n.Alias, prefix)
		default:
			out = append(out, KV{prefix, n.Value})
		}
	}
	walk(&doc, "")
	return out, nil
}
