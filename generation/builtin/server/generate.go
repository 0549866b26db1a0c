package server

import (
	"context"
	"slices"
	"sync"

	"github.com/troupe-rl/troupe/generation/builtin"
)

// job is one prompt to sample n completions for.
type job struct {
	prompt  []int32
	p       params
	adapter string
	first   int // choice index of sample 0
}

// piece is a slice of one choice's output: text plus the tokens (and
// their logprobs) it came from. A streamed choice is a sequence of pieces
// whose concatenation is the non-streamed choice; the last has finish set.
type piece struct {
	index    int
	text     string
	tokens   []int32
	logprobs []float32
	finish   string // "", "stop" or "length"
	// stopReason is vLLM's stop_reason (final pieces only): the stop
	// string or stop token id that ended the choice, or nil.
	stopReason any
}

// sampleState follows one sample while it is generated. The engine calls
// OnToken and Stop from its decode loop; both only take this sample's lock.
type sampleState struct {
	mu   sync.Mutex
	d    *detokenizer
	lps  []float32
	sent int // tokens already handed out in pieces
}

// syncTo pushes the tokens the detokenizer has not seen yet.
func (st *sampleState) syncTo(tokens []int32) {
	for len(st.d.ids) < len(tokens) {
		st.d.push(tokens[len(st.d.ids)])
	}
}

// pending returns the piece that can be shown now (nil if nothing new).
func (st *sampleState) pending(index int) *piece {
	n := min(len(st.lps), len(st.d.ids))
	text := st.d.take(false)
	if text == "" && n == st.sent {
		return nil
	}
	pc := &piece{index: index, text: text, tokens: slices.Clone(st.d.ids[st.sent:n]), logprobs: slices.Clone(st.lps[st.sent:n])}
	st.sent = n
	return pc
}

// generate runs j on the engine. With emit non-nil, pieces are passed to it
// as they are decoded (from the engine's goroutine; emit must not block);
// the returned pieces are then only the final ones. Without emit, each
// returned piece is a whole choice.
func generate(ctx context.Context, m *Model, j job, emit func(*piece)) ([]*piece, int, error) {
	states := make([]*sampleState, j.p.n)
	for i := range states {
		states[i] = &sampleState{d: newDetokenizer(detokTokenizer{m.Tokenizer}, j.p.stop)}
	}
	stopTokens := append([]int32(nil), j.p.stopIDs...)
	if !j.p.ignoreEOS {
		stopTokens = append(stopTokens, m.EOS...)
	}
	req := &builtin.Request{
		Prompt:      j.prompt,
		N:           j.p.n,
		MaxTokens:   j.p.maxTokens,
		Temperature: j.p.temperature,
		TopP:        j.p.topP,
		TopK:        j.p.topK,
		Seed:        j.p.seed,
		StopTokens:  stopTokens,
		Adapter:     j.adapter,
	}
	if len(j.p.stop) > 0 || emit != nil {
		req.Stop = func(i int, tokens []int32) bool {
			if i < 0 || i >= len(states) {
				return false
			}
			st := states[i]
			st.mu.Lock()
			defer st.mu.Unlock()
			st.syncTo(tokens)
			return st.d.stopped()
		}
		req.OnToken = func(i int, tok int32, lp float32) {
			if i < 0 || i >= len(states) {
				return
			}
			st := states[i]
			st.mu.Lock()
			if len(st.d.ids) == len(st.lps) { // Stop has not seen it yet
				st.d.push(tok)
			}
			st.lps = append(st.lps, lp)
			var pc *piece
			if emit != nil {
				pc = st.pending(j.first + i)
			}
			st.mu.Unlock()
			if pc != nil {
				emit(pc)
			}
		}
	}
	res, err := m.Engine.Generate(ctx, req)
	if err != nil {
		return nil, 0, err
	}
	out := make([]*piece, len(res.Samples))
	for i, smp := range res.Samples {
		if i >= len(states) {
			states = append(states, &sampleState{d: newDetokenizer(detokTokenizer{m.Tokenizer}, j.p.stop)})
		}
		st := states[i]
		st.mu.Lock()
		st.syncTo(smp.Tokens)
		st.d.flush()
		st.lps = smp.Logprobs // pieces handed out hold copies
		finish := smp.FinishReason
		if st.d.stopped() {
			finish = "stop"
		}
		reason := stopReason(st.d.stopStr, finish, smp.Tokens, j.p.stopIDs)
		if emit == nil {
			out[i] = &piece{index: j.first + i, text: st.d.final(), tokens: smp.Tokens, logprobs: smp.Logprobs, finish: finish, stopReason: reason}
		} else {
			sent := min(st.sent, len(smp.Tokens))
			out[i] = &piece{index: j.first + i, text: st.d.take(true), tokens: smp.Tokens[sent:], logprobs: smp.Logprobs[min(sent, len(smp.Logprobs)):], finish: finish, stopReason: reason}
		}
		st.mu.Unlock()
	}
	return out, res.PromptTokens, nil
}

// detokTokenizer decodes with special tokens skipped, as generated text is
// shown.
type detokTokenizer struct{ t Tokenizer }

func (d detokTokenizer) Decode(ids []int32) string { return d.t.Decode(ids, true) }
