package builtin

import (
	"fmt"
	"math/rand/v2"
)

// prefillChunk bounds the rows of one prefill forward so that scratch stays
// small for long prompts (positions attend across chunks through the cache).
const prefillChunk = 256

// schedState is the scheduler goroutine's state.
type schedState struct {
	active   []*seq
	pending  *job // head job with samples not yet admitted
	rows     []fwdRow
	samplers []sampler
	picks    []pick
	logits   []float32 // the step's logits, for sampleRange
	sampleFn func(worker, lo, hi int)
}

type pick struct {
	tok int32
	lp  float32
}

// schedule is the engine's single scheduler goroutine: admit → one
// decode step for every active sequence → retire finished ones → repeat.
func (e *Engine) schedule() {
	defer close(e.stopped)
	st := &schedState{samplers: make([]sampler, e.pool.n)}
	st.sampleFn = st.sampleRange
	for {
		e.dropCancelled(st)
		if len(st.active) == 0 && st.pending == nil {
			select {
			case j := <-e.queue:
				st.pending = j
			case <-e.closing:
				e.failAll(st)
				return
			}
		}
		select {
		case <-e.closing:
			e.failAll(st)
			return
		default:
		}
		e.admit(st)
		if len(st.active) > 0 {
			e.step(st)
		}
	}
}

// failAll ends every queued and running request with ErrClosed.
func (e *Engine) failAll(st *schedState) {
	for _, s := range st.active {
		s.job.finish(nil, ErrClosed)
	}
	if st.pending != nil {
		st.pending.finish(nil, ErrClosed)
	}
	for {
		select {
		case j := <-e.queue:
			j.finish(nil, ErrClosed)
		default:
			return
		}
	}
}

// dropCancelled removes the sequences of requests whose context ended.
func (e *Engine) dropCancelled(st *schedState) {
	keep := st.active[:0]
	for _, s := range st.active {
		if err := s.job.ctx.Err(); err != nil {
			s.job.finish(nil, fmt.Errorf("builtin: generate: %w", err))
			continue
		}
		keep = append(keep, s)
	}
	clear(st.active[len(keep):])
	st.active = keep
	if j := st.pending; j != nil && j.ctx.Err() != nil {
		j.finish(nil, fmt.Errorf("builtin: generate: %w", j.ctx.Err()))
		st.pending = nil
	}
}

// admit moves queued requests' samples into the batch while there is room:
// the head request is prefilled once, then its samples join one by one.
func (e *Engine) admit(st *schedState) {
	for len(st.active) < e.opts.MaxBatch {
		if st.pending == nil {
			select {
			case j := <-e.queue:
				st.pending = j
			default:
				return
			}
		}
		j := st.pending
		if err := j.ctx.Err(); err != nil {
			j.finish(nil, fmt.Errorf("builtin: generate: %w", err))
			st.pending = nil
			continue
		}
		if j.prefix == nil {
			e.prefill(j)
		}
		for j.admitted < j.req.N && len(st.active) < e.opts.MaxBatch {
			s := e.startSeq(st, j)
			if !s.finished {
				st.active = append(st.active, s)
			}
		}
		if j.admitted == j.req.N {
			j.first = nil
			st.pending = nil
		}
	}
}

// prefill runs the prompt through the model once, leaving its KV as the
// request's shared prefix and the last position's logits in j.first.
func (e *Engine) prefill(j *job) {
	m := e.m
	P := len(j.req.Prompt)
	kv := newSeqKV(len(m.layers), nil)
	kv.reserve(P, m.kvd, P)
	var rows []fwdRow
	for c := 0; c < P; c += prefillChunk {
		end := min(c+prefillChunk, P)
		rows = rows[:0]
		for p := c; p < end; p++ {
			rows = append(rows, fwdRow{tok: j.req.Prompt[p], pos: p, kv: kv, lora: j.ad, logits: p == P-1})
		}
		logits := e.fwd.forward(rows)
		if end == P {
			j.first = append([]float32(nil), logits[:m.vocab]...)
		}
	}
	j.prefix = &kv.own
}

// startSeq begins sample j.admitted: it shares the prompt's KV and samples
// its first token from the prefill's logits with its own RNG stream.
func (e *Engine) startSeq(st *schedState, j *job) *seq {
	i := j.admitted
	j.admitted++
	s := &seq{
		job: j, idx: i,
		kv:       newSeqKV(len(e.m.layers), j.prefix),
		rng:      rand.New(rand.NewPCG(j.seed, uint64(i))),
		tokens:   make([]int32, 0, min(j.req.MaxTokens, 4096)),
		logprobs: make([]float32, 0, min(j.req.MaxTokens, 4096)),
	}
	j.seqs = append(j.seqs, s)
	tok, lp := st.samplers[0].sample(j.first, j.params, s.rng)
	e.emit(s, tok, lp)
	return s
}

// emit records a sampled token, runs the callbacks and finishes the
// sample when a stop condition holds.
func (e *Engine) emit(s *seq, tok int32, lp float32) {
	j := s.job
	s.tokens = append(s.tokens, tok)
	s.logprobs = append(s.logprobs, lp)
	s.last = tok
	if j.req.OnToken != nil {
		j.req.OnToken(s.idx, tok, lp)
	}
	reason := ""
	switch {
	case j.stopSet[tok]:
		reason = "stop"
	case j.req.Stop != nil && j.req.Stop(s.idx, s.tokens):
		reason = "stop"
	case len(s.tokens) >= j.req.MaxTokens:
		reason = "length"
	}
	if reason == "" {
		return
	}
	s.finished = true
	s.kv = nil
	j.samples[s.idx] = Sample{Tokens: s.tokens, Logprobs: s.logprobs, FinishReason: reason}
	j.remaining--
	if j.remaining == 0 {
		j.finish(&Result{Samples: j.samples, PromptTokens: len(j.req.Prompt)}, nil)
	}
}

// step decodes one token for every active sequence.
func (e *Engine) step(st *schedState) {
	m := e.m
	st.rows = st.rows[:0]
	for _, s := range st.active {
		pos := s.kv.len()
		s.kv.reserve(pos+1, m.kvd, e.ctxLen)
		st.rows = append(st.rows, fwdRow{tok: s.last, pos: pos, kv: s.kv, lora: s.job.ad, logits: true})
	}
	logits := e.fwd.forward(st.rows)
	n := len(st.active)
	if cap(st.picks) < n {
		st.picks = make([]pick, n)
	}
	st.picks = st.picks[:n]
	st.logits = logits
	e.pool.parallelFor(&e.fwd.loop, n, 1, st.sampleFn)
	st.logits = nil
	keep := st.active[:0]
	for i, s := range st.active {
		e.emit(s, st.picks[i].tok, st.picks[i].lp)
		if !s.finished && s.job.err == nil {
			keep = append(keep, s)
		}
	}
	clear(st.active[len(keep):])
	st.active = keep
}

// sampleRange samples the next token of active sequences [lo, hi).
func (st *schedState) sampleRange(w, lo, hi int) {
	V := len(st.logits) / len(st.active)
	for i := lo; i < hi; i++ {
		s := st.active[i]
		tok, lp := st.samplers[w].sample(st.logits[i*V:(i+1)*V], s.job.params, s.rng)
		st.picks[i] = pick{tok, lp}
	}
}
