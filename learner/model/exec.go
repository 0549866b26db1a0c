package model

import (
	"fmt"
	"slices"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX's graph DSL reads best unqualified.
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/troupe-rl/troupe/learner/loss"
)

// Sequence is one (prompt, completion) pair to score or train on.
type Sequence struct {
	Prompt, Completion []int32
	// Logprobs are the behaviour policy's logprobs of Completion (training only).
	Logprobs []float32
	// Advantage of the whole completion (training only).
	Advantage float64
	// Temperature the completion was sampled at; 0 means 1.
	Temperature float64
}

// Len is len(Prompt)+len(Completion).
func (s *Sequence) Len() int { return len(s.Prompt) + len(s.Completion) }

// Batch is a padded micro-batch: B rows of S positions, flattened
// row-major. Targets[t] is the token at t+1, LossMask[t] is 1 where that
// token is a completion token, Behaviour[t] its behaviour logprob. Rows past
// the real ones are all padding.
type Batch struct {
	B, S              int
	Rows              int // real rows
	Tokens, Targets   []int32
	KeyMask, LossMask []float32
	Behaviour         []float32
	Adv, InvTemp      []float64 // per row
	NumTokens         int       // completion tokens (Σ LossMask)
}

// Pack pads seqs into a Batch of B ≥ len(seqs) rows and S ≥ max length
// positions. Each sequence needs a non-empty prompt.
func Pack(seqs []Sequence, B, S int) (*Batch, error) {
	if B < len(seqs) {
		return nil, fmt.Errorf("model: Pack: %d sequences in %d rows", len(seqs), B)
	}
	b := &Batch{B: B, S: S, Rows: len(seqs),
		Tokens: make([]int32, B*S), Targets: make([]int32, B*S),
		KeyMask: make([]float32, B*S), LossMask: make([]float32, B*S), Behaviour: make([]float32, B*S),
		Adv: make([]float64, B), InvTemp: make([]float64, B)}
	for i := range b.InvTemp {
		b.InvTemp[i] = 1
	}
	for r, s := range seqs {
		n := s.Len()
		if len(s.Prompt) == 0 {
			return nil, fmt.Errorf("model: Pack: sequence %d has an empty prompt", r)
		}
		if n > S {
			return nil, fmt.Errorf("model: Pack: sequence %d has %d tokens, more than S=%d", r, n, S)
		}
		if s.Logprobs != nil && len(s.Logprobs) != len(s.Completion) {
			return nil, fmt.Errorf("model: Pack: sequence %d has %d logprobs for %d completion tokens", r, len(s.Logprobs), len(s.Completion))
		}
		row := r * S
		copy(b.Tokens[row:], s.Prompt)
		copy(b.Tokens[row+len(s.Prompt):], s.Completion)
		for t := range n {
			b.KeyMask[row+t] = 1
			if t+1 < n {
				b.Targets[row+t] = b.Tokens[row+t+1]
			}
		}
		for j := range s.Completion {
			t := row + len(s.Prompt) + j - 1
			b.LossMask[t] = 1
			if s.Logprobs != nil {
				b.Behaviour[t] = s.Logprobs[j]
			}
		}
		b.NumTokens += len(s.Completion)
		b.Adv[r] = s.Advantage
		if s.Temperature > 0 {
			b.InvTemp[r] = 1 / s.Temperature
		}
	}
	return b, nil
}

// CompletionLogprobs extracts each real row's completion logprobs from a
// [B·S] per-position array (as returned by Logprobs) given the sequences.
func CompletionLogprobs(seqs []Sequence, S int, perPos []float64) [][]float64 {
	out := make([][]float64, len(seqs))
	for r, s := range seqs {
		for j := range s.Completion {
			out[r] = append(out[r], perPos[r*S+len(s.Prompt)+j-1])
		}
	}
	return out
}

// Program is the model compiled (lazily, per batch shape) for one LoRA
// layout and loss config on a backend.
type Program struct {
	m        *Model
	backend  compute.Backend
	lcfg     LoRAConfig
	modules  []string // LoRA module paths in parameter order
	lossCfg  loss.Config
	train    *Exec
	logprobs *Exec
	argmax   *Exec // built on first use
	ropes    map[int][2]*tensors.Tensor
}

// NewProgram prepares the graphs for adapters shaped like lora (whose
// values are passed at each call) and the loss config lc.
func (m *Model) NewProgram(backend compute.Backend, lora *LoRA, lc loss.Config) (*Program, error) {
	p := &Program{m: m, backend: backend, lcfg: lora.Config, modules: slices.Clone(lora.Modules), lossCfg: lc,
		ropes: map[int][2]*tensors.Tensor{}}
	var err error
	if p.train, err = NewExec(backend, p.trainGraph); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if p.logprobs, err = NewExec(backend, p.logprobGraph); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	p.train.SetMaxCache(256)
	p.logprobs.SetMaxCache(256)
	return p, nil
}

// Finalize frees the compiled graphs.
func (p *Program) Finalize() {
	p.train.Finalize()
	p.logprobs.Finalize()
	if p.argmax != nil {
		p.argmax.Finalize()
	}
}

// nodes splits the leading graph inputs into weights and LoRA factors.
func (p *Program) nodes(in []*Node) (Nodes, []*Node, []*Node) {
	nw := len(p.m.names)
	w := Nodes{Base: map[string]*Node{}, A: map[string]*Node{}, B: map[string]*Node{}, Scale: p.lcfg.Scaling()}
	for i, name := range p.m.names {
		w.Base[name] = in[i]
	}
	lora := in[nw : nw+2*len(p.modules)]
	for i, path := range p.modules {
		w.A[path], w.B[path] = lora[2*i], lora[2*i+1]
	}
	return w, lora, in[nw+2*len(p.modules):]
}

// trainGraph: inputs = weights, LoRA, tokens, targets, keyMask, lossMask,
// behaviour, adv, invTemp, invN, cos, sin; outputs = loss·invN, one gradient
// per LoRA parameter, loss.NumSums sums, the entropy sum.
func (p *Program) trainGraph(g *Graph, in []*Node) []*Node {
	w, lora, rest := p.nodes(in)
	tokens, targets, keyMask, lossMask, beh, adv, invTemp, invN, cos, sin :=
		rest[0], rest[1], rest[2], rest[3], rest[4], rest[5], rest[6], rest[7], rest[8], rest[9]
	inputs := Inputs{Tokens: tokens, KeyMask: keyMask, Cos: cos, Sin: sin}
	logp, ent := TokenLogprobs(p.m.Config, w, inputs, targets, invTemp)
	li := loss.Inputs{Logp: logp, Behaviour: beh, Advantages: adv, Mask: lossMask}
	if p.lossCfg.KLCoef > 0 {
		base := w
		base.A, base.B, base.Scale = nil, nil, 0
		ref, _ := TokenLogprobs(p.m.Config, base, inputs, targets, invTemp)
		li.Ref = StopGradient(ref)
	}
	sums := loss.Build(p.lossCfg, li)
	total := Mul(sums.Loss, invN)
	grads := Gradient(total, lora...)
	out := append([]*Node{total}, grads...)
	out = append(out, sums.List()...)
	entSum := ReduceAllSum(Where(GreaterThan(lossMask, ZerosLike(lossMask)), ent, ZerosLike(ent)))
	return append(out, entSum)
}

// logprobGraph: inputs = weights, LoRA, tokens, targets, keyMask, invTemp,
// cos, sin, scale; outputs = per-position logprobs [B, S].
func (p *Program) logprobGraph(g *Graph, in []*Node) []*Node {
	w, _, rest := p.nodes(in)
	tokens, targets, keyMask, invTemp, cos, sin := rest[0], rest[1], rest[2], rest[3], rest[4], rest[5]
	logp, _ := TokenLogprobs(p.m.Config, w, Inputs{Tokens: tokens, KeyMask: keyMask, Cos: cos, Sin: sin}, targets, invTemp)
	return []*Node{logp}
}

// argmaxGraph: inputs = weights, LoRA, tokens, keyMask, cos, sin; output =
// the most likely next token at every position [B, S] (ties → lowest id).
func (p *Program) argmaxGraph(g *Graph, in []*Node) []*Node {
	w, _, rest := p.nodes(in)
	tokens, keyMask, cos, sin := rest[0], rest[1], rest[2], rest[3]
	logits := Logits(p.m.Config, w, Inputs{Tokens: tokens, KeyMask: keyMask, Cos: cos, Sin: sin})
	dims := tokens.Shape().Dimensions
	return []*Node{Reshape(ArgMax(logits, 1, dtypes.Int32), dims[0], dims[1])}
}

// Argmax returns, for every position of batch b, the token the model
// (with lora, or the base model when disable is set) finds most likely
// next: greedy decoding's choice, for checking an inference server's
// greedy output in one teacher-forced pass.
func (p *Program) Argmax(lora *LoRA, b *Batch, disable bool) ([]int32, error) {
	if p.argmax == nil {
		e, err := NewExec(p.backend, p.argmaxGraph)
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		e.SetMaxCache(64)
		p.argmax = e
	}
	args, err := p.args(lora, disable)
	if err != nil {
		return nil, err
	}
	cos, sin := p.rope(b.S)
	args = append(args, tensors.FromFlatDataAndDimensions(b.Tokens, b.B, b.S), p.floats(b.KeyMask, b.B, b.S), cos, sin)
	out, err := p.argmax.Exec(args...)
	if err != nil {
		return nil, fmt.Errorf("model: argmax: %w", err)
	}
	defer out[0].FinalizeAll()
	res := make([]int32, b.B*b.S)
	out[0].ConstFlatData(func(flat any) { copy(res, flat.([]int32)) })
	return res, nil
}

func (p *Program) rope(S int) (cos, sin *tensors.Tensor) {
	if r, ok := p.ropes[S]; ok {
		return r[0], r[1]
	}
	cos, sin = p.m.ropeTables(S)
	p.ropes[S] = [2]*tensors.Tensor{cos, sin}
	return cos, sin
}

func (p *Program) args(lora *LoRA, disable bool) ([]any, error) {
	if !slices.Equal(lora.Modules, p.modules) || lora.Config.Rank != p.lcfg.Rank || lora.Config.Alpha != p.lcfg.Alpha {
		return nil, fmt.Errorf("model: adapter layout differs from the program's")
	}
	args := make([]any, 0, len(p.m.weights)+len(lora.Data)+12)
	for _, t := range p.m.weights {
		args = append(args, t)
	}
	for i, d := range lora.Data {
		if disable && i%2 == 1 {
			d = make([]float32, len(d)) // B = 0: the base model
		}
		args = append(args, hostTensor(d, p.m.DType, lora.Shapes[i]...))
	}
	return args, nil
}

func (p *Program) floats(x []float32, dims ...int) *tensors.Tensor {
	return hostTensor(x, p.m.DType, dims...)
}

// StepResult is what one micro-batch's forward+backward returns.
type StepResult struct {
	Loss       float64 // Σℓ·invN
	Sums       loss.Sums
	EntropySum float64 // over completion tokens
}

// Step runs forward and backward on batch b with adapter lora, adds the
// gradients of Σℓ·invN to acc (one []float64 per LoRA parameter, shaped
// like lora.Data) and returns the loss and sums.
func (p *Program) Step(lora *LoRA, b *Batch, invN float64, acc [][]float64) (*StepResult, error) {
	args, err := p.args(lora, false)
	if err != nil {
		return nil, err
	}
	cos, sin := p.rope(b.S)
	args = append(args,
		tensors.FromFlatDataAndDimensions(b.Tokens, b.B, b.S),
		tensors.FromFlatDataAndDimensions(b.Targets, b.B, b.S),
		p.floats(b.KeyMask, b.B, b.S), p.floats(b.LossMask, b.B, b.S), p.floats(b.Behaviour, b.B, b.S),
		hostTensor64(b.Adv, p.m.DType, b.B), hostTensor64(b.InvTemp, p.m.DType, b.B),
		hostTensor64([]float64{invN}, p.m.DType), cos, sin)
	out, err := p.train.Exec(args...)
	if err != nil {
		return nil, fmt.Errorf("model: train step: %w", err)
	}
	defer func() {
		for _, t := range out {
			t.FinalizeAll()
		}
	}()
	res := &StepResult{Loss: scalar(out[0])}
	nl := len(lora.Data)
	for i := range nl {
		addFlat(acc[i], out[1+i])
	}
	vals := make([]float64, loss.NumSums)
	for i := range vals {
		vals[i] = scalar(out[1+nl+i])
	}
	res.Sums = loss.SumsFromValues(vals)
	res.EntropySum = scalar(out[1+nl+loss.NumSums])
	return res, nil
}

// Logprobs returns per-position logprobs [B·S] of batch b under lora
// (disable: the base model, adapter switched off).
func (p *Program) Logprobs(lora *LoRA, b *Batch, disable bool) ([]float64, error) {
	args, err := p.args(lora, disable)
	if err != nil {
		return nil, err
	}
	cos, sin := p.rope(b.S)
	args = append(args,
		tensors.FromFlatDataAndDimensions(b.Tokens, b.B, b.S),
		tensors.FromFlatDataAndDimensions(b.Targets, b.B, b.S),
		p.floats(b.KeyMask, b.B, b.S), hostTensor64(b.InvTemp, p.m.DType, b.B), cos, sin)
	out, err := p.logprobs.Exec(args...)
	if err != nil {
		return nil, fmt.Errorf("model: logprobs: %w", err)
	}
	defer out[0].FinalizeAll()
	res := make([]float64, b.B*b.S)
	addFlat(res, out[0])
	return res, nil
}

func scalar(t *tensors.Tensor) float64 {
	switch v := t.Value().(type) {
	case float32:
		return float64(v)
	case float64:
		return v
	}
	panic(fmt.Sprintf("model: scalar of %s", t.Shape()))
}

// addFlat adds t's flat data to dst.
func addFlat(dst []float64, t *tensors.Tensor) {
	t.ConstFlatData(func(flat any) {
		switch f := flat.(type) {
		case []float32:
			for i, v := range f {
				dst[i] += float64(v)
			}
		case []float64:
			for i, v := range f {
				dst[i] += v
			}
		}
	})
}

// Score returns each sequence's completion logprobs (at its temperature)
// under lora, or under the base model when disable is set: the learner's
// side of the engine parity test. All sequences go in one batch.
func (p *Program) Score(lora *LoRA, seqs []Sequence, disable bool) ([][]float64, error) {
	S := 0
	for _, s := range seqs {
		S = max(S, s.Len())
	}
	b, err := Pack(seqs, len(seqs), S)
	if err != nil {
		return nil, err
	}
	lp, err := p.Logprobs(lora, b, disable)
	if err != nil {
		return nil, err
	}
	return CompletionLogprobs(seqs, S, lp), nil
}
