package learner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"sort"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"

	"github.com/troupe-rl/troupe/internal/config"
	"github.com/troupe-rl/troupe/learner/atgrpo"
	"github.com/troupe-rl/troupe/learner/loss"
	"github.com/troupe-rl/troupe/learner/model"
)

// Row is one LLM call to learn from: the fields of a trajectory row the
// learner needs (trajectory.Step maps onto it one field per field).
type Row struct {
	ProblemID string
	Turn      int
	Role      string
	// PromptIDs are the prompt tokens exactly as the server used them;
	// CompletionIDs the sampled tokens; Logprobs the behaviour policy's
	// logprob of each completion token.
	PromptIDs     []int32
	CompletionIDs []int32
	Logprobs      []float32
	RewardLocal   float64
	RewardTeam    float64
	// Temperature the completion was sampled at (logprobs are scored at
	// logits/T); 0 means 1.
	Temperature float64
}

// Batch is one training step's input.
type Batch struct {
	Rows []Row
	// Shards names the trajectory shards the rows came from; they are
	// recorded in checkpoints as consumed (opaque strings).
	Shards []string
}

// Learner trains one LoRA adapter per policy on a frozen base model.
// Methods are not safe for concurrent use.
type Learner struct {
	cfg      Config
	model    *model.Model
	backend  compute.Backend
	roles    []string
	policies map[string]*policy
	names    []string // policy names, sorted
	step     int
	consumed []string
	log      *slog.Logger
	broken   error
}

type policy struct {
	name string
	lora *model.LoRA
	opt  *AdamW
	prog *model.Program
}

// Options are New's optional arguments.
type Options struct {
	Logger *slog.Logger
	// Backend overrides the one cfg.Device selects (tests share one).
	Backend compute.Backend
	// Resume is a checkpoint folder to restore (see Checkpoint).
	Resume string
}

// New loads the base model from modelDir and creates one fresh adapter
// per policy for roles (or restores them from opts.Resume).
func New(ctx context.Context, cfg Config, modelDir string, roles []string, opts Options) (*Learner, error) {
	// Validate the section as the experiment loader does, so that errors
	// name keys by their full path (learner.lr, learner.loss.kind).
	if err := config.ValidateSection("learner", &cfg); err != nil {
		return nil, fmt.Errorf("learner: %w", err)
	}
	if err := (atgrpo.Options{Alpha: cfg.Alpha}).Validate(); err != nil {
		return nil, fmt.Errorf("learner: env.alpha: %w", err)
	}
	if len(roles) == 0 {
		return nil, fmt.Errorf("learner: no roles")
	}
	m, err := model.Load(modelDir, dtypes.Float32)
	if err != nil {
		return nil, fmt.Errorf("learner: %w", err)
	}
	return newWithModel(ctx, cfg, m, roles, opts)
}

func newWithModel(ctx context.Context, cfg Config, m *model.Model, roles []string, opts Options) (*Learner, error) {
	l := &Learner{cfg: cfg, model: m, backend: opts.Backend, roles: slices.Clone(roles), policies: map[string]*policy{}, log: opts.Logger}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.backend == nil {
		b, err := NewBackend(&cfg)
		if err != nil {
			return nil, err
		}
		l.backend = b
	}
	lc := model.LoRAConfig{Rank: cfg.LoRARank, Alpha: cfg.LoRAAlpha, Targets: cfg.LoRATargets}
	for _, r := range roles {
		name := cfg.PolicyFor(r)
		if _, ok := l.policies[name]; ok {
			continue
		}
		lora, err := model.NewLoRA(m.Config, lc, cfg.Seed+uint64(len(l.names)))
		if err != nil {
			return nil, fmt.Errorf("learner: %w", err)
		}
		prog, err := m.NewProgram(l.backend, lora, cfg.Loss)
		if err != nil {
			return nil, fmt.Errorf("learner: %w", err)
		}
		l.policies[name] = &policy{name: name, lora: lora, prog: prog,
			opt: NewAdamW(lora.Data, cfg.Beta1, cfg.Beta2, cfg.AdamEps, cfg.WeightDecay)}
		l.names = append(l.names, name)
	}
	sort.Strings(l.names)
	if opts.Resume != "" {
		if err := l.restore(opts.Resume); err != nil {
			return nil, err
		}
	}
	l.log.InfoContext(ctx, "learner ready", "config", cfg.String(), "policies", l.names, "step", l.step,
		"lora_params", l.policies[l.names[0]].lora.NumParams(), "backend", l.backend.Description())
	return l, nil
}

// Policies returns the policy (adapter) names, sorted.
func (l *Learner) Policies() []string { return slices.Clone(l.names) }

// StepCount is the number of steps taken (restored from checkpoints).
func (l *Learner) StepCount() int { return l.step }

// Consumed lists the shard names of every batch stepped on so far.
func (l *Learner) Consumed() []string { return slices.Clone(l.consumed) }

// LoRA returns policy's adapter (not a copy: do not modify).
func (l *Learner) LoRA(policy string) *model.LoRA {
	if p := l.policies[policy]; p != nil {
		return p.lora
	}
	return nil
}

// Model returns the base model.
func (l *Learner) Model() *model.Model { return l.model }

// Close frees compiled graphs.
func (l *Learner) Close() {
	for _, p := range l.policies {
		p.prog.Finalize()
	}
}

// Metrics is what one Step reports (one line of metrics.jsonl).
type Metrics struct {
	Step         int                      `json:"step"`
	Time         time.Time                `json:"time"`
	Rows         int                      `json:"rows"`
	Tokens       int                      `json:"tokens"` // completion tokens trained on
	Loss         float64                  `json:"loss"`   // token-weighted over policies
	Groups       atgrpo.Stats             `json:"groups"` // counts, zero-variance fraction, reward by role and turn
	Policies     map[string]PolicyMetrics `json:"policies"`
	Seconds      float64                  `json:"seconds"`
	TokensPerSec float64                  `json:"tokens_per_sec"` // completion tokens / s
	PaddedPerSec float64                  `json:"padded_tokens_per_sec"`
}

// PolicyMetrics are one adapter's step metrics.
type PolicyMetrics struct {
	loss.Metrics
	Entropy      float64 `json:"entropy"`
	GradNorm     float64 `json:"grad_norm"` // before clipping
	LR           float64 `json:"lr"`
	Rows         int     `json:"rows"`
	MicroBatches int     `json:"micro_batches"`
	PaddedTokens int     `json:"padded_tokens"`
	OptSteps     int     `json:"opt_steps"`
}

// Step trains every policy on its rows of b: advantages over the whole
// batch (groups never span policies' roles differently: a group has one
// role in tree mode), then per policy micro-batched forward/backward with
// gradient accumulation, global-norm clipping and one AdamW step per
// mini-batch (Config.MiniBatches, default one).
func (l *Learner) Step(ctx context.Context, b *Batch) (*Metrics, error) {
	if l.broken != nil {
		return nil, fmt.Errorf("learner: unusable after an earlier failure: %w", l.broken)
	}
	start := time.Now()
	samples := make([]atgrpo.Sample, len(b.Rows))
	for i, r := range b.Rows {
		if _, ok := l.policies[l.cfg.PolicyFor(r.Role)]; !ok {
			return nil, fmt.Errorf("learner: row %d: role %q has no policy (roles %v)", i, r.Role, l.roles)
		}
		if len(r.PromptIDs) == 0 || len(r.Logprobs) != len(r.CompletionIDs) {
			return nil, fmt.Errorf("learner: row %d: needs a prompt and one logprob per completion token (%d prompt, %d completion, %d logprobs)",
				i, len(r.PromptIDs), len(r.CompletionIDs), len(r.Logprobs))
		}
		if err := l.checkTokens(slices.Concat(r.PromptIDs, r.CompletionIDs)); err != nil {
			return nil, fmt.Errorf("learner: row %d: %w", i, err)
		}
		samples[i] = atgrpo.Sample{ProblemID: r.ProblemID, Turn: r.Turn, Role: r.Role, LocalReward: r.RewardLocal, TeamReward: r.RewardTeam}
	}
	adv, err := atgrpo.Compute(samples, l.cfg.atgrpoOptions())
	if err != nil {
		return nil, fmt.Errorf("learner: %w", err)
	}
	met := &Metrics{Step: l.step + 1, Rows: len(b.Rows), Groups: adv.Stats, Policies: map[string]PolicyMetrics{}}
	err = l.trainPolicies(ctx, met, start, func(name string) []model.Sequence {
		var seqs []model.Sequence
		for i, r := range b.Rows {
			if !adv.Keep[i] || len(r.CompletionIDs) == 0 || l.cfg.PolicyFor(r.Role) != name {
				continue
			}
			seqs = append(seqs, model.Sequence{Prompt: r.PromptIDs, Completion: r.CompletionIDs, Logprobs: r.Logprobs,
				Advantage: adv.Advantages[i], Temperature: r.Temperature})
		}
		return seqs
	})
	if err != nil {
		return nil, err
	}
	l.consumed = append(l.consumed, b.Shards...)
	return met, nil
}

// trainPolicies trains every policy on the sequences seqsOf gives for it
// (skipping policies with none), fills met's per-policy metrics and
// totals from start, and counts the learner step.
func (l *Learner) trainPolicies(ctx context.Context, met *Metrics, start time.Time, seqsOf func(policy string) []model.Sequence) error {
	var lossTok float64
	padded := 0
	for _, name := range l.names {
		seqs := seqsOf(name)
		if len(seqs) == 0 {
			continue
		}
		pm, err := l.stepPolicy(ctx, l.policies[name], seqs)
		if err != nil {
			return err
		}
		met.Policies[name] = *pm
		met.Tokens += pm.Tokens
		lossTok += pm.Loss * float64(pm.Tokens)
		padded += pm.PaddedTokens
	}
	l.step++
	if met.Tokens > 0 {
		met.Loss = lossTok / float64(met.Tokens)
	}
	met.Time = time.Now().UTC()
	met.Seconds = time.Since(start).Seconds()
	met.TokensPerSec = float64(met.Tokens) / met.Seconds
	met.PaddedPerSec = float64(padded) / met.Seconds
	return nil
}

// stepPolicy trains p on seqs: one optimiser step per mini-batch
// (Config.MiniBatches slices, rows dealt round-robin), each micro-batched
// with gradient accumulation and global-norm clipping. The metrics cover
// every slice (grad norm: the largest; lr: the last step's).
func (l *Learner) stepPolicy(ctx context.Context, p *policy, seqs []model.Sequence) (*PolicyMetrics, error) {
	n := min(max(l.cfg.MiniBatches, 1), len(seqs))
	var sums loss.Sums
	var ent float64
	pm := &PolicyMetrics{Rows: len(seqs)}
	for j := range n {
		var part []model.Sequence
		for i := j; i < len(seqs); i += n {
			part = append(part, seqs[i])
		}
		if err := l.optStep(ctx, p, part, pm, &sums, &ent); err != nil {
			return nil, err
		}
	}
	pm.OptSteps = p.opt.T
	pm.Metrics = sums.Metrics()
	if sums.Tokens > 0 {
		pm.Entropy = ent / sums.Tokens
	}
	return pm, nil
}

// optStep is one optimiser step of p on seqs, adding to pm, sums and ent.
func (l *Learner) optStep(ctx context.Context, p *policy, seqs []model.Sequence, pm *PolicyMetrics, sums *loss.Sums, ent *float64) error {
	mbs, err := MicroBatches(seqs, l.cfg.MicroBatchTokens)
	if err != nil {
		return fmt.Errorf("learner: policy %s: %w", p.name, err)
	}
	total := 0
	for _, s := range seqs {
		total += len(s.Completion)
	}
	invN := 1 / float64(max(total, 1))
	acc := make([][]float64, len(p.lora.Data))
	for i := range acc {
		acc[i] = make([]float64, len(p.lora.Data[i]))
	}
	pm.MicroBatches += len(mbs)
	for _, mb := range mbs {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("learner: %w", err)
		}
		var res *model.StepResult
		err := l.watchdog(ctx, func() error {
			var err error
			res, err = p.prog.Step(p.lora, mb, invN, acc)
			return err
		})
		if err != nil {
			return fmt.Errorf("learner: policy %s: %w", p.name, err)
		}
		sums.Add(res.Sums)
		*ent += res.EntropySum
		pm.PaddedTokens += mb.B * mb.S
	}
	for _, g := range acc {
		for _, x := range g {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("learner: policy %s: non-finite gradient; adapter left unchanged", p.name)
			}
		}
	}
	pm.GradNorm = max(pm.GradNorm, ClipGlobalNorm(acc, l.cfg.GradClip))
	pm.LR = LRAt(p.opt.T+1, l.cfg.LR, l.cfg.WarmupSteps, l.cfg.TotalSteps, l.cfg.MinLRRatio)
	p.opt.Step(p.lora.Data, acc, pm.LR)
	return nil
}

// watchdog runs fn and fails if it takes longer than StepTimeout (a GoMLX
// backend hang), logging every goroutine's stack. After a timeout the
// learner is unusable: fn may still be running.
func (l *Learner) watchdog(ctx context.Context, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("panic in forward/backward: %v", r)
			}
		}()
		done <- fn()
	}()
	t := time.NewTimer(l.cfg.StepTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		buf := make([]byte, 1<<22)
		n := runtime.Stack(buf, true)
		l.log.ErrorContext(ctx, "learner: forward/backward exceeded step_timeout; goroutines follow", "timeout", l.cfg.StepTimeout, "goroutines", string(buf[:n]))
		l.broken = fmt.Errorf("forward/backward exceeded step_timeout %v (backend hang?)", l.cfg.StepTimeout)
		return l.broken
	}
}

// ErrTooLong is returned when one sequence alone exceeds the micro-batch
// token budget.
var ErrTooLong = errors.New("sequence longer than micro_batch_tokens")

// MicroBatches packs seqs into padded micro-batches of at most budget
// rows×S positions. Sequences are sorted by length (longest first, stable)
// so similar lengths share a batch; S is rounded up to a multiple of 16
// and the row count to a power of two, which bounds the number of distinct
// shapes the backend compiles.
func MicroBatches(seqs []model.Sequence, budget int) ([]*model.Batch, error) {
	order := make([]int, len(seqs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return seqs[order[a]].Len() > seqs[order[b]].Len() })
	var out []*model.Batch
	for i := 0; i < len(order); {
		S := roundUp(seqs[order[i]].Len(), 16)
		if S > budget {
			return nil, fmt.Errorf("%w: %d tokens (padded %d) > %d", ErrTooLong, seqs[order[i]].Len(), S, budget)
		}
		n := 1
		for i+n < len(order) && pow2(n+1)*S <= budget {
			n++
		}
		group := make([]model.Sequence, n)
		for j := range n {
			group[j] = seqs[order[i+j]]
		}
		b, err := model.Pack(group, pow2(n), S)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
		i += n
	}
	return out, nil
}

func roundUp(x, m int) int { return (x + m - 1) / m * m }

func pow2(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}
