package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-rl/troupe/generation/builtin"
)

// Engine is what the server needs from the inference engine;
// *builtin.Engine satisfies it.
type Engine interface {
	Generate(ctx context.Context, req *builtin.Request) (*builtin.Result, error)
	LoadAdapter(ctx context.Context, name, dir string) error
	UnloadAdapter(ctx context.Context, name string) error
	Adapters() []string
	ContextLength() int
	VocabSize() int
}

// Tokenizer is what the server needs from a tokenizer.
type Tokenizer interface {
	// Encode turns text into token ids; special tokens written in the text
	// are recognised. addSpecial adds what the tokenizer's post-processor
	// adds (a BOS token for Llama 3; nothing for Qwen).
	Encode(text string, addSpecial bool) []int32
	// Decode turns ids into text, leaving out special tokens when
	// skipSpecial is set. Bytes of an unfinished UTF-8 character may come
	// out raw or as U+FFFD.
	Decode(ids []int32, skipSpecial bool) string
}

// ChatTemplate renders chat messages into a prompt.
type ChatTemplate interface {
	Render(messages []Message, opts RenderOptions) (string, error)
}

// Message is one chat message as the template sees it.
type Message struct {
	Role             string
	Content          string
	Name             string
	ReasoningContent string
	ToolCallID       string
	ToolCalls        []any
}

// RenderOptions are the template switches a request may set.
type RenderOptions struct {
	AddGenerationPrompt  bool
	ContinueFinalMessage bool
	Tools                []any
	// Kwargs are chat_template_kwargs (e.g. enable_thinking: false).
	Kwargs map[string]any
}

// Model is a loaded model: the engine plus the text side.
type Model struct {
	Engine    Engine
	Tokenizer Tokenizer
	Template  ChatTemplate
	// Name is the served model name (what "model" must say to pick the base).
	Name string
	// Root is the model folder, shown in /v1/models.
	Root string
	// EOS are the end-of-sequence token ids: generation of a sample stops
	// after one (unless ignore_eos).
	EOS []int32
	// Close, if set, releases the model (the engine) at shutdown.
	Close func() error
}

// Options configure a Server.
type Options struct {
	// APIKey, when set, is required as "Authorization: Bearer KEY" on
	// every endpoint except /health.
	APIKey string
	// MaxBodyBytes bounds a request body (default 16 MiB); beyond it: 413.
	MaxBodyBytes int64
	// MaxConcurrent bounds the generation requests (completions, chat)
	// accepted at once; beyond it: 429 (default 0 = only the engine's
	// queue bounds them).
	MaxConcurrent int
	// ShutdownTimeout bounds how long Serve waits for requests in flight
	// after its context is cancelled before cutting them off (default 30 s).
	ShutdownTimeout time.Duration
	// Logger receives request logs at debug level and lifecycle events at
	// info (default slog.Default()).
	Logger *slog.Logger
}

// Server is the HTTP server. Create it with New, give it a model with
// SetModel (until then every model endpoint answers 503), and run it with
// Serve or use it as an http.Handler.
type Server struct {
	opts  Options
	log   *slog.Logger
	mux   *http.ServeMux
	model atomic.Pointer[Model]
	// draining is set when shutdown begins: new requests get 503.
	draining atomic.Bool
	slots    chan struct{} // MaxConcurrent tokens; nil = unbounded

	// adapterMu serialises adapter loads/unloads; adapterPaths remembers
	// each adapter's folder for /v1/models.
	adapterMu    sync.Mutex
	adapterPaths sync.Map // name → path

	// baseCtx is cancelled to cut off requests in flight.
	baseCtx    context.Context
	cancelBase context.CancelFunc
	created    int64
}

// New returns a server with no model loaded yet.
func New(opts Options) *Server {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 16 << 20
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{opts: opts, log: opts.Logger, mux: http.NewServeMux(), created: time.Now().Unix()}
	if opts.MaxConcurrent > 0 {
		s.slots = make(chan struct{}, opts.MaxConcurrent)
	}
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())
	s.mux.HandleFunc("GET /health", s.handleHealth)
	s.mux.HandleFunc("GET /v1/models", s.withModel(s.handleModels))
	s.mux.HandleFunc("POST /v1/completions", s.withModel(s.handleCompletions))
	s.mux.HandleFunc("POST /v1/chat/completions", s.withModel(s.handleChat))
	s.mux.HandleFunc("POST /v1/load_lora_adapter", s.withModel(s.handleLoadAdapter))
	s.mux.HandleFunc("POST /v1/unload_lora_adapter", s.withModel(s.handleUnloadAdapter))
	s.mux.HandleFunc("POST /tokenize", s.withModel(s.handleTokenize))
	s.mux.HandleFunc("POST /detokenize", s.withModel(s.handleDetokenize))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
			Message: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)})
	})
	return s
}

// SetModel makes m the served model; the server is ready from then on.
func (s *Server) SetModel(m *Model) {
	if m.Name == "" {
		m.Name = "model"
	}
	s.model.Store(m)
	s.log.Info("server: model ready", "model", m.Name, "context_length", m.Engine.ContextLength())
}

// Ready reports whether a model is loaded and the server is not draining.
func (s *Server) Ready() bool { return s.model.Load() != nil && !s.draining.Load() }

// ServeHTTP implements http.Handler: auth, body limit, request logging.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		s.log.Debug("server: request", "method", r.Method, "path", r.URL.Path, "status", rw.status, "duration", time.Since(start))
	}()
	if s.draining.Load() {
		rw.Header().Set("Connection", "close")
		writeError(rw, errShuttingDown)
		return
	}
	if s.opts.APIKey != "" && r.URL.Path != "/health" && !s.authorised(r) {
		rw.Header().Set("WWW-Authenticate", `Bearer realm="troupe"`)
		writeError(rw, errUnauthorized)
		return
	}
	r.Body = http.MaxBytesReader(rw, r.Body, s.opts.MaxBodyBytes)
	s.mux.ServeHTTP(rw, r)
}

func (s *Server) authorised(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(s.opts.APIKey)) == 1
}

// withModel answers 503 until a model is loaded.
func (s *Server) withModel(h func(http.ResponseWriter, *http.Request, *Model)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		m := s.model.Load()
		if m == nil {
			writeError(w, errLoading)
			return
		}
		h(w, r, m)
	}
}

// acquire takes a generation slot or reports that the queue is full.
func (s *Server) acquire() (release func(), err *apiError) {
	if s.slots == nil {
		return func() {}, nil
	}
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots }, nil
	default:
		return nil, errQueueFull
	}
}

// requestContext is cancelled when the client goes away or when shutdown
// gives up waiting.
func (s *Server) requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.baseCtx, cancel)
	return ctx, func() { stop(); cancel() }
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if s.model.Load() == nil {
		writeError(w, errLoading)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Serve answers requests on ln until ctx is cancelled, then shuts down
// gracefully: new requests get 503 (and the listener closes), requests in
// flight get up to ShutdownTimeout to finish before they are cut off, and
// the model is closed. It returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.cancelBase()
		return fmt.Errorf("server: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("server: shutting down", "deadline", s.opts.ShutdownTimeout)
	s.draining.Store(true)
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	if err != nil {
		s.log.Warn("server: requests still in flight at the deadline; cutting them off")
		s.cancelBase()
		hs.Close()
	}
	s.cancelBase()
	<-errc
	if cerr := s.closeModel(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("server: shutdown: %w", err)
	}
	return nil
}

// BeginShutdown makes the server answer 503 to new requests (Serve does it
// when its context ends; tests and embedders call it directly).
func (s *Server) BeginShutdown() { s.draining.Store(true) }

func (s *Server) closeModel() error {
	m := s.model.Load()
	if m == nil || m.Close == nil {
		return nil
	}
	return m.Close()
}

// statusWriter records the status for the request log and passes Flush
// through for streaming.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
