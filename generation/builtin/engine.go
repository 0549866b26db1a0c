package builtin

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"github.com/troupe-rl/troupe/generation/builtin/kernels"
	"github.com/troupe-rl/troupe/internal/hf"
)

// Engine is the embedded inference engine. It is safe for concurrent use:
// concurrent Generate calls are decoded together in one running batch (a
// request that arrives while others decode joins the batch at the next
// step; finished sequences leave it).
//
// One scheduler goroutine owns the model's scratch, the KV caches and the
// batch; a fixed pool of Options.Threads workers (the scheduler included)
// runs the matrix kernels and attention. Generate only validates, queues
// and waits. Weights are read-only after New, and adapters are immutable
// versions swapped under a mutex.
type Engine struct {
	m      *model
	opts   Options
	ctxLen int
	pool   *pool
	fwd    *forwarder

	mu       sync.RWMutex
	adapters map[string]*adapterVersion

	queue     chan *job
	closing   chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once
}

// Open loads a Hugging Face model folder (config.json and
// model.safetensors or its sharded index) and starts an engine on it.
// Malformed folders give an error naming the file and key or tensor, which
// implements BadInput() bool.
func Open(modelDir string, opts Options) (*Engine, error) {
	cfg, err := hf.ReadModelConfig(modelDir)
	if err != nil {
		return nil, fmt.Errorf("builtin: open %s: %w", modelDir, err)
	}
	w, err := hf.LoadWeights(modelDir)
	if err != nil {
		return nil, fmt.Errorf("builtin: open %s: %w", modelDir, err)
	}
	return newEngine(cfg, w, opts, modelDir)
}

// New starts an engine on in-memory weights (Hugging Face tensor names, as
// hf.LoadWeights returns them). The engine keeps references to the
// embedding, norm and lm_head tensors (the caller must not modify them)
// and copies the rest.
func New(cfg *hf.ModelConfig, weights map[string]*hf.Tensor, opts Options) (*Engine, error) {
	return newEngine(cfg, weights, opts, "weights")
}

func newEngine(cfg *hf.ModelConfig, weights map[string]*hf.Tensor, opts Options, where string) (*Engine, error) {
	m, err := newModel(cfg, weights, where)
	if err != nil {
		return nil, err
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 32
	}
	if opts.MaxQueue <= 0 {
		opts.MaxQueue = 256
	}
	if opts.Threads <= 0 {
		opts.Threads = runtime.GOMAXPROCS(0)
	}
	ctxLen := cfg.MaxPositionEmbeddings
	if opts.MaxContext > 0 && opts.MaxContext < ctxLen {
		ctxLen = opts.MaxContext
	}
	e := &Engine{
		m: m, opts: opts, ctxLen: ctxLen,
		pool:     newPool(opts.Threads),
		adapters: map[string]*adapterVersion{},
		queue:    make(chan *job, opts.MaxQueue),
		closing:  make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	e.fwd = newForwarder(m, e.pool, ctxLen)
	slog.Debug("builtin: engine started", "model_type", cfg.ModelType, "layers", cfg.NumHiddenLayers,
		"hidden", cfg.HiddenSize, "vocab", cfg.VocabSize, "context", ctxLen, "threads", opts.Threads,
		"kernels", kernels.Variant())
	go e.schedule()
	return e, nil
}

// ContextLength is the maximum number of prompt plus generated tokens.
func (e *Engine) ContextLength() int { return e.ctxLen }

// VocabSize is the model's vocabulary size (valid token ids are below it).
func (e *Engine) VocabSize() int { return e.m.vocab }

// LoadAdapter loads a PEFT LoRA adapter folder under name, replacing any
// adapter of that name. Requests in flight keep the version they started
// with; later requests naming it get the new one. Malformed folders give
// an error naming the file (BadInput).
func (e *Engine) LoadAdapter(ctx context.Context, name, dir string) error {
	if name == "" {
		return fmt.Errorf("%w: adapter name is empty", ErrBadRequest)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("builtin: load adapter %q: %w", name, err)
	}
	a, err := hf.ReadAdapter(dir, e.m.cfg)
	if err != nil {
		return fmt.Errorf("builtin: load adapter %q: %w", name, err)
	}
	av, err := newAdapterVersion(e.m, name, dir, a)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.adapters[name] = av
	e.mu.Unlock()
	slog.Info("builtin: adapter loaded", "name", name, "dir", dir, "r", a.Config.R, "modules", len(a.Modules))
	return nil
}

// UnloadAdapter forgets the adapter name (ErrUnknownAdapter if absent).
// Requests in flight that use it finish with it.
func (e *Engine) UnloadAdapter(ctx context.Context, name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.adapters[name]; !ok {
		return fmt.Errorf("%w %q", ErrUnknownAdapter, name)
	}
	delete(e.adapters, name)
	return nil
}

// Adapters lists the loaded adapters' names, sorted.
func (e *Engine) Adapters() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	names := make([]string, 0, len(e.adapters))
	for n := range e.adapters {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Close stops the engine: queued and running requests fail with ErrClosed,
// later calls too. It waits for the scheduler to stop.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		close(e.closing)
		<-e.stopped
		e.pool.close()
	})
	return nil
}

// job is one request on its way through the scheduler.
type job struct {
	ctx     context.Context
	req     Request // shallow copy; Prompt and StopTokens are not modified
	params  samplingParams
	ad      *adapterVersion
	seed    uint64
	stopSet map[int32]bool

	// Scheduler-owned state.
	prefix    *kvBlock
	first     []float32 // logits after the prompt
	admitted  int       // samples started
	remaining int       // samples not finished
	seqs      []*seq
	samples   []Sample

	done chan struct{} // closed when res or err is set
	res  *Result
	err  error
}

// seq is one sample being decoded.
type seq struct {
	job      *job
	idx      int
	kv       *seqKV
	rng      *rand.Rand
	tokens   []int32
	logprobs []float32
	last     int32
	finished bool
}

// Generate runs req and returns its samples. It blocks until all samples
// finish, ctx ends (the request's sequences are dropped at the next step
// and ctx's error is returned), or the engine closes. Errors: ErrBadRequest
// (malformed request), ErrContextLength (len(Prompt)+MaxTokens exceeds
// ContextLength — checked up front, never truncated), ErrUnknownAdapter,
// ErrQueueFull (MaxQueue requests already wait), ErrClosed.
func (e *Engine) Generate(ctx context.Context, req *Request) (*Result, error) {
	j, err := e.newJob(ctx, req)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.closing:
		return nil, ErrClosed
	default:
	}
	select {
	case e.queue <- j:
	default:
		return nil, fmt.Errorf("%w (%d waiting)", ErrQueueFull, e.opts.MaxQueue)
	}
	select {
	case <-j.done:
		return j.res, j.err
	case <-ctx.Done():
		return nil, fmt.Errorf("builtin: generate: %w", ctx.Err())
	case <-e.stopped:
		select {
		case <-j.done:
			return j.res, j.err
		default:
			return nil, ErrClosed
		}
	}
}

func (e *Engine) newJob(ctx context.Context, req *Request) (*job, error) {
	if req == nil {
		return nil, fmt.Errorf("%w: nil request", ErrBadRequest)
	}
	bad := func(format string, args ...any) (*job, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrBadRequest}, args...)...)
	}
	switch {
	case len(req.Prompt) == 0:
		return bad("empty prompt")
	case req.N < 0:
		return bad("n must be ≥ 1, got %d", req.N)
	case req.MaxTokens <= 0:
		return bad("max_tokens must be > 0, got %d", req.MaxTokens)
	case !(req.Temperature >= 0) || math.IsInf(req.Temperature, 0):
		return bad("temperature must be ≥ 0, got %v", req.Temperature)
	case !(req.TopP >= 0 && req.TopP <= 1):
		return bad("top_p must be in [0, 1], got %v", req.TopP)
	case req.TopK < 0:
		return bad("top_k must be ≥ 0, got %d", req.TopK)
	}
	for i, t := range req.Prompt {
		if t < 0 || int(t) >= e.m.vocab {
			return bad("prompt token %d at index %d is outside the vocabulary [0, %d)", t, i, e.m.vocab)
		}
	}
	if len(req.Prompt)+req.MaxTokens > e.ctxLen {
		return nil, fmt.Errorf("%w: %d prompt + %d max_tokens > %d", ErrContextLength, len(req.Prompt), req.MaxTokens, e.ctxLen)
	}
	j := &job{ctx: ctx, req: *req, done: make(chan struct{})}
	if j.req.N == 0 {
		j.req.N = 1
	}
	j.params = samplingParams{temperature: req.Temperature, topP: req.TopP, topK: req.TopK}
	if req.Seed != nil {
		j.seed = uint64(*req.Seed)
	} else {
		j.seed = rand.Uint64()
	}
	if len(req.StopTokens) > 0 {
		j.stopSet = make(map[int32]bool, len(req.StopTokens))
		for _, t := range req.StopTokens {
			j.stopSet[t] = true
		}
	}
	if req.Adapter != "" {
		e.mu.RLock()
		j.ad = e.adapters[req.Adapter]
		e.mu.RUnlock()
		if j.ad == nil {
			return nil, fmt.Errorf("%w %q", ErrUnknownAdapter, req.Adapter)
		}
	}
	j.remaining = j.req.N
	j.samples = make([]Sample, j.req.N)
	return j, nil
}

func (j *job) finish(res *Result, err error) {
	if j.res != nil || j.err != nil {
		return
	}
	j.res, j.err = res, err
	close(j.done)
}
