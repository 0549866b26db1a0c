package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/troupe-rl/troupe/learner/atgrpo"
	"github.com/troupe-rl/troupe/learner/loss"
	"github.com/troupe-rl/troupe/learner/trajectory"
)

// Values of the "type" field of a metrics.jsonl line. A line without a
// type is a training step.
const (
	TypeTrain  = "train"
	TypeEval   = "eval"
	TypePhases = "phases"
)

// MetricsName is the metrics file's name in a run folder.
const MetricsName = "metrics.jsonl"

// TrainRecord is one training step as the learner writes it (learner.Metrics,
// mirrored here so that reading a run does not pull in the learner's tensor
// stack; cmd/troupe's tests hold the two in sync). Unknown fields are
// ignored and missing ones read as zero.
type TrainRecord struct {
	Step         int                     `json:"step"`
	Time         time.Time               `json:"time"`
	Rows         int                     `json:"rows"`
	Tokens       int                     `json:"tokens"`
	Loss         float64                 `json:"loss"`
	Groups       atgrpo.Stats            `json:"groups"`
	Policies     map[string]PolicyRecord `json:"policies"`
	Seconds      float64                 `json:"seconds"`
	TokensPerSec float64                 `json:"tokens_per_sec"`
	PaddedPerSec float64                 `json:"padded_tokens_per_sec"`
}

// PolicyRecord is one adapter's metrics of a training step
// (learner.PolicyMetrics).
type PolicyRecord struct {
	loss.Metrics
	Entropy      float64 `json:"entropy"`
	GradNorm     float64 `json:"grad_norm"`
	LR           float64 `json:"lr"`
	Rows         int     `json:"rows"`
	MicroBatches int     `json:"micro_batches"`
	PaddedTokens int     `json:"padded_tokens"`
	OptSteps     int     `json:"opt_steps"`
}

// EvalRecord is one evaluation of the current adapters on the validation
// problems, one line of metrics.jsonl with "type": "eval". [EvalFromSteps]
// computes it from the eval split's trajectory rows; [AppendRecord] writes
// it.
type EvalRecord struct {
	// Type is always "eval" on disk (set by MarshalJSON).
	Type string `json:"type"`
	// Iteration is the rollout/learn iteration after which the adapters
	// were evaluated (-1 = before any training).
	Iteration int64 `json:"iteration"`
	// Step is the number of learner steps taken so far (0 = base model);
	// plots put evals on the same step axis as training.
	Step int `json:"step"`
	// Time is when the evaluation finished.
	Time time.Time `json:"time"`
	// SuccessRate is pass@1: per problem the fraction of its samples that
	// succeeded, averaged over problems.
	SuccessRate float64 `json:"success_rate"`
	// SuccessByRole[r] is the fraction of episodes whose success came on a
	// step by role r (who closed the task); the values sum to the plain
	// episode success rate.
	SuccessByRole map[string]float64 `json:"success_by_role,omitempty"`
	// SuccessByTurn[t] is the fraction of episodes solved by turn t
	// (cumulative: success within t+1 turns).
	SuccessByTurn map[int]float64 `json:"success_by_turn,omitempty"`
	// RewardMean and RewardStd are over every chosen step's mixed reward.
	RewardMean float64 `json:"reward_mean"`
	RewardStd  float64 `json:"reward_std"`
	// FormatOKRate is the fraction of chosen steps whose info verdict is
	// "ok" (or absent); 1 − it is the format/parse failure rate.
	FormatOKRate float64 `json:"format_ok_rate"`
	// CompletionTokens is the mean completion length in tokens.
	CompletionTokens float64 `json:"completion_tokens"`
	// Problems and Samples count distinct problems and episodes.
	Problems int `json:"problems"`
	Samples  int `json:"samples"`
	// WallSeconds is the evaluation's wall time.
	WallSeconds float64 `json:"wall_seconds"`
}

// MarshalJSON writes the record with "type": "eval".
func (e EvalRecord) MarshalJSON() ([]byte, error) {
	type plain EvalRecord
	e.Type = TypeEval
	return json.Marshal(plain(e))
}

// PhaseRecord is the wall time of one iteration's phases, one line of
// metrics.jsonl with "type": "phases". Phase names are free-form; the
// driver writes "rollout", "learn", "sync" (adapter export and hot-swap)
// and "eval".
type PhaseRecord struct {
	Type      string             `json:"type"`
	Iteration int64              `json:"iteration"`
	Step      int                `json:"step"`
	Time      time.Time          `json:"time"`
	Seconds   map[string]float64 `json:"seconds"`
}

// MarshalJSON writes the record with "type": "phases".
func (p PhaseRecord) MarshalJSON() ([]byte, error) {
	type plain PhaseRecord
	p.Type = TypePhases
	return json.Marshal(plain(p))
}

// Metrics is the parsed content of a metrics.jsonl file.
type Metrics struct {
	Train  []TrainRecord
	Eval   []EvalRecord
	Phases []PhaseRecord
	// Skipped counts lines of an unknown type and a torn last line (a
	// writer killed mid-line).
	Skipped int
}

// AppendRecord appends rec as one JSON line to the metrics file at path
// (created if needed) and syncs it. Lines are written with one write on a
// file opened for appending, so a concurrent learner.MetricsWriter on the
// same file never interleaves with it.
func AppendRecord(path string, rec any) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("report: metrics: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("report: metrics: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("report: metrics: %w", err)
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("report: metrics: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("report: metrics: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("report: metrics: %w", err)
	}
	return nil
}

// AppendEval appends an eval record to runDir/metrics.jsonl.
func AppendEval(runDir string, rec EvalRecord) error {
	return AppendRecord(filepath.Join(runDir, MetricsName), rec)
}

// AppendPhases appends a phase-timing record to runDir/metrics.jsonl.
func AppendPhases(runDir string, rec PhaseRecord) error {
	return AppendRecord(filepath.Join(runDir, MetricsName), rec)
}

// ReadMetrics reads a metrics.jsonl file. Lines without "type" (or with
// "train") are training steps, "eval" and "phases" lines their records,
// other types are counted in Skipped; unknown fields are ignored. A last
// line without a newline that does not parse (a torn write) is skipped; any
// other unparsable line is an *Error naming the file and line.
func ReadMetrics(path string) (*Metrics, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fileErr(path, err)
	}
	return parseMetrics(path, data)
}

func parseMetrics(path string, data []byte) (*Metrics, error) {
	m := &Metrics{}
	r := bufio.NewReader(bytes.NewReader(data))
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if len(b) == 0 && err == io.EOF {
			break
		}
		torn := err == io.EOF // last line has no newline
		b = bytes.TrimSpace(b)
		if len(b) > 0 {
			if perr := m.parseLine(b); perr != nil {
				if !torn {
					return nil, &Error{Path: path, Line: line, Err: perr, Bad: true}
				}
				m.Skipped++
			}
		}
		if err != nil {
			break
		}
	}
	sort.SliceStable(m.Train, func(i, j int) bool { return m.Train[i].Step < m.Train[j].Step })
	sort.SliceStable(m.Eval, func(i, j int) bool { return m.Eval[i].Step < m.Eval[j].Step })
	sort.SliceStable(m.Phases, func(i, j int) bool { return m.Phases[i].Iteration < m.Phases[j].Iteration })
	return m, nil
}

func (m *Metrics) parseLine(b []byte) error {
	var head struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	typ := TypeTrain
	if head.Type != nil {
		typ = *head.Type
	}
	switch typ {
	case TypeTrain:
		var t TrainRecord
		if err := json.Unmarshal(b, &t); err != nil {
			return err
		}
		m.Train = append(m.Train, t)
	case TypeEval:
		var e EvalRecord
		if err := json.Unmarshal(b, &e); err != nil {
			return err
		}
		m.Eval = append(m.Eval, e)
	case TypePhases:
		var p PhaseRecord
		if err := json.Unmarshal(b, &p); err != nil {
			return err
		}
		m.Phases = append(m.Phases, p)
	default:
		m.Skipped++
	}
	return nil
}

// EvalFromSteps computes an eval record from the rows of an evaluation
// (normally the split "eval" rows of one iteration). Only chosen rows
// count: they are the path the episode took. Iteration, Step, Time and
// WallSeconds are the caller's to fill.
func EvalFromSteps(rows []trajectory.Step) EvalRecord {
	eps := GroupEpisodes(rows)
	rec := EvalRecord{SuccessByRole: map[string]float64{}, SuccessByTurn: map[int]float64{}}
	if len(eps) == 0 {
		return rec
	}
	type acc struct{ n, ok float64 }
	byProblem := map[string]*acc{}
	maxTurn := int32(-1)
	var rewards []float64
	var okSteps, steps, tokens, tokenSteps float64
	solvedAt := map[int32]float64{}
	for _, ep := range eps {
		a := byProblem[ep.ProblemID]
		if a == nil {
			a = &acc{}
			byProblem[ep.ProblemID] = a
		}
		a.n++
		for _, s := range ep.Path() {
			maxTurn = max(maxTurn, s.Turn)
			rewards = append(rewards, s.Reward)
			steps++
			if Verdict(s.Info) == "ok" {
				okSteps++
			}
			if n := len(s.CompletionIDs); n > 0 {
				tokens += float64(n)
				tokenSteps++
			}
		}
		if ep.Success {
			a.ok++
			if s, ok := ep.SolvedBy(); ok {
				rec.SuccessByRole[s.Role]++
				solvedAt[s.Turn]++
			}
		}
	}
	for _, a := range byProblem {
		rec.SuccessRate += a.ok / a.n
	}
	rec.SuccessRate /= float64(len(byProblem))
	n := float64(len(eps))
	for r := range rec.SuccessByRole {
		rec.SuccessByRole[r] /= n
	}
	cum := 0.0
	for t := int32(0); t <= maxTurn; t++ {
		cum += solvedAt[t]
		rec.SuccessByTurn[int(t)] = cum / n
	}
	rec.RewardMean, rec.RewardStd = atgrpo.MeanStd(rewards)
	if steps > 0 {
		rec.FormatOKRate = okSteps / steps
	}
	if tokenSteps > 0 {
		rec.CompletionTokens = tokens / tokenSteps
	}
	rec.Problems = len(byProblem)
	rec.Samples = len(eps)
	return rec
}

// Verdict returns the "verdict" of a row's info JSON: "ok" when the info is
// empty or has no verdict, "bad_info" when it is not a JSON object.
func Verdict(info string) string {
	if info == "" {
		return "ok"
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(info), &m); err != nil {
		return "bad_info"
	}
	switch v := m["verdict"].(type) {
	case nil:
		return "ok"
	case string:
		if v == "" {
			return "ok"
		}
		return v
	default:
		return fmt.Sprint(v)
	}
}

// Error is a problem with one input file or folder of a report: it names the
// path (and line). When Bad is true the input is to blame (missing, not a
// run folder, corrupt), and BadInput reports true so that the CLI exits 2.
type Error struct {
	Path string
	Line int // 1-based, 0 when not about a line
	Err  error
	Bad  bool
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("report: %s:%d: %v", e.Path, e.Line, e.Err)
	}
	return fmt.Sprintf("report: %s: %v", e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// BadInput reports whether the input is to blame.
func (e *Error) BadInput() bool { return e.Bad }

func fileErr(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &Error{Path: path, Err: err, Bad: errors.Is(err, fs.ErrNotExist)}
}

// finite maps NaN and ±Inf to 0 so that a bad value cannot break a plot's
// axis range.
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}
