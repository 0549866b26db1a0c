package server

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/troupe-rl/troupe/generation/builtin"
)

// byteTokenizer: ids 0–255 are bytes; specials follow.
type byteTokenizer struct{}

var fakeSpecials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}

const fakeEOS = 256 + 2 // <|im_end|>

func (byteTokenizer) Encode(text string, addSpecial bool) []int32 {
	var out []int32
	for len(text) > 0 {
		matched := false
		for i, sp := range fakeSpecials {
			if strings.HasPrefix(text, sp) {
				out = append(out, int32(256+i))
				text = text[len(sp):]
				matched = true
				break
			}
		}
		if !matched {
			out = append(out, int32(text[0]))
			text = text[1:]
		}
	}
	return out
}

func (byteTokenizer) Decode(ids []int32, skipSpecial bool) string {
	var b []byte
	for _, id := range ids {
		if id >= 256 {
			if !skipSpecial && int(id-256) < len(fakeSpecials) {
				b = append(b, fakeSpecials[id-256]...)
			}
			continue
		}
		b = append(b, byte(id))
	}
	return string(b)
}

// chatmlTemplate is a minimal ChatML renderer.
type chatmlTemplate struct{}

func (chatmlTemplate) Render(msgs []Message, o RenderOptions) (string, error) {
	var sb strings.Builder
	for i, m := range msgs {
		fmt.Fprintf(&sb, "<|im_start|>%s\n%s", m.Role, m.Content)
		if !(o.ContinueFinalMessage && i == len(msgs)-1) {
			sb.WriteString("<|im_end|>\n")
		}
	}
	if o.AddGenerationPrompt {
		sb.WriteString("<|im_start|>assistant\n")
		if v, ok := o.Kwargs["enable_thinking"].(bool); ok && !v {
			sb.WriteString("<think>\n\n</think>\n\n")
		}
	}
	return sb.String(), nil
}

// fakeEngine generates printable bytes (sometimes EOS, sometimes a UTF-8
// character split over two tokens) deterministically from the seed, the
// prompt, the sample index and the adapter.
type fakeEngine struct {
	ctxLen   int
	maxQueue int
	// gate, if set, blocks each Generate until it is closed or the
	// request's context ends.
	gate    chan struct{}
	started chan struct{} // receives one value per Generate that passed admission

	mu       sync.Mutex
	queued   int
	adapters map[string]string
	calls    int
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{ctxLen: 256, adapters: map[string]string{}}
}

func (e *fakeEngine) ContextLength() int { return e.ctxLen }
func (e *fakeEngine) VocabSize() int     { return 256 + len(fakeSpecials) }

func (e *fakeEngine) Adapters() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for n := range e.adapters {
		out = append(out, n)
	}
	return out
}

func (e *fakeEngine) LoadAdapter(ctx context.Context, name, dir string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.adapters[name] = dir
	return nil
}

func (e *fakeEngine) UnloadAdapter(ctx context.Context, name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.adapters[name]; !ok {
		return builtin.ErrUnknownAdapter
	}
	delete(e.adapters, name)
	return nil
}

func (e *fakeEngine) Generate(ctx context.Context, req *builtin.Request) (*builtin.Result, error) {
	if req.MaxTokens <= 0 || len(req.Prompt) == 0 {
		return nil, builtin.ErrBadRequest
	}
	if len(req.Prompt)+req.MaxTokens > e.ctxLen {
		return nil, builtin.ErrContextLength
	}
	e.mu.Lock()
	if req.Adapter != "" {
		if _, ok := e.adapters[req.Adapter]; !ok {
			e.mu.Unlock()
			return nil, builtin.ErrUnknownAdapter
		}
	}
	if e.maxQueue > 0 && e.queued >= e.maxQueue {
		e.mu.Unlock()
		return nil, builtin.ErrQueueFull
	}
	e.queued++
	e.calls++
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.queued--
		e.mu.Unlock()
	}()
	if e.started != nil {
		e.started <- struct{}{}
	}
	if e.gate != nil {
		select {
		case <-e.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	n := max(req.N, 1)
	res := &builtin.Result{PromptTokens: len(req.Prompt)}
	h := fnv.New64a()
	for _, t := range req.Prompt {
		fmt.Fprint(h, t, ",")
	}
	h.Write([]byte(req.Adapter))
	var seed uint64
	if req.Seed != nil {
		seed = uint64(*req.Seed)
	} else {
		seed = rand.Uint64()
	}
	for i := 0; i < n; i++ {
		rng := rand.New(rand.NewPCG(seed, h.Sum64()+uint64(i)))
		s := builtin.Sample{FinishReason: "length"}
		var pendingCont bool
	gen:
		for len(s.Tokens) < req.MaxTokens {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			var tok int32
			switch r := rng.IntN(100); {
			case pendingCont:
				tok, pendingCont = 0xA9, false // second byte of "é"
			case r < 2 && req.Temperature > 0:
				tok = fakeEOS
			case r < 6:
				tok, pendingCont = 0xC3, true
			case r < 20:
				tok = ' '
			default:
				tok = int32('a' + rng.IntN(26))
			}
			lp := float32(-rng.Float64() * 5)
			s.Tokens = append(s.Tokens, tok)
			s.Logprobs = append(s.Logprobs, lp)
			if req.OnToken != nil {
				req.OnToken(i, tok, lp)
			}
			for _, st := range req.StopTokens {
				if tok == st {
					s.FinishReason = "stop"
					break gen
				}
			}
			if req.Stop != nil && req.Stop(i, s.Tokens) {
				s.FinishReason = "stop"
				break
			}
		}
		res.Samples = append(res.Samples, s)
	}
	return res, nil
}
