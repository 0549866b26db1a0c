package ollama_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/troupe-rl/troupe/generation/builtin"
	"github.com/troupe-rl/troupe/generation/builtin/modelgen"
	"github.com/troupe-rl/troupe/generation/builtin/server"
	"github.com/troupe-rl/troupe/generation/tokenizer"
)

// standIn is an httptest server that speaks Ollama's wire format for the
// endpoints the backend uses (/api/generate, /api/blobs/:digest,
// /api/create, /api/delete), generating with troupe's embedded engine on
// a tiny model. A real Ollama server cannot be built here (its module zip
// lacks llama.cpp's vendored sources), so this stand-in is the one place
// the project tests a backend against something other than the real
// server. It behaves as Ollama does where the backend depends on it:
// status errors as {"error": …}, one JSON line for stream: false, per-token
// logprobs as token text and bytes with no ids, and text cut at a stop
// string.
type standIn struct {
	t     testing.TB
	URL   string
	Dir   string // the model folder (the backend's generation.tokenizer)
	Base  string // the base model's name
	model *server.Model
	tok   *tokenizer.Tokenizer

	// fail, if set, picks the status for the nth /api/generate request
	// (from 1): 0 serves it, -1 answers 200 with a line that is not JSON.
	fail func(n int) int
	// noLoRA makes /api/create with adapters fail as Qwen3 on Ollama's new
	// engine does.
	noLoRA bool

	mu       sync.Mutex
	n        int
	requests []api.GenerateRequest
	blobs    map[string][]byte
	models   map[string]api.CreateRequest
	creates  []api.CreateRequest
	deletes  []string
}

func startStandIn(t testing.TB) *standIn {
	t.Helper()
	dir := t.TempDir()
	if _, err := modelgen.Write(dir, modelgen.Options{Force: true}); err != nil {
		t.Fatal(err)
	}
	m, err := server.Load(dir, server.LoadOptions{Engine: builtin.Options{MaxQueue: 512}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &standIn{t: t, Dir: dir, Base: "tiny:latest", model: m, tok: tok, blobs: map[string][]byte{}, models: map[string]api.CreateRequest{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/generate", s.generate)
	mux.HandleFunc("POST /api/blobs/{digest}", s.blob)
	mux.HandleFunc("POST /api/create", s.create)
	mux.HandleFunc("DELETE /api/delete", s.delete)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

func ollamaError(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": fmt.Sprintf(format, args...)})
}

func (s *standIn) generate(w http.ResponseWriter, r *http.Request) {
	var req api.GenerateRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		ollamaError(w, 400, "%v", err)
		return
	}
	s.mu.Lock()
	s.n++
	n := s.n
	s.requests = append(s.requests, req)
	_, created := s.models[req.Model]
	s.mu.Unlock()
	if s.fail != nil {
		switch st := s.fail(n); {
		case st == -1:
			w.Write([]byte("<html>proxy error</html>\n"))
			return
		case st == 503:
			w.WriteHeader(503) // no body, as a proxy in front might answer
			return
		case st != 0:
			ollamaError(w, st, "injected failure %d", st)
			return
		}
	}
	if req.Model != s.Base && !created {
		ollamaError(w, 404, "model '%s' not found", req.Model)
		return
	}
	if !req.Raw || req.Stream == nil || *req.Stream || !req.Logprobs {
		ollamaError(w, 400, "stand-in expects raw: true, stream: false, logprobs: true")
		return
	}
	cr := &server.CompletionRequest{Prompt: req.Prompt, N: 1, Temperature: 0.8, TopP: 0.9, TopK: 40, MaxTokens: 128} // Ollama's defaults
	for k, v := range req.Options {
		switch k {
		case "temperature":
			cr.Temperature = v.(float64)
		case "top_p":
			cr.TopP = v.(float64)
		case "top_k":
			cr.TopK = int(v.(float64))
		case "num_predict":
			cr.MaxTokens = int(v.(float64))
		case "repeat_penalty":
			if v.(float64) != 1 {
				ollamaError(w, 400, "stand-in: repeat_penalty %v is not supported", v)
				return
			}
		case "seed":
			seed := int64(v.(float64))
			cr.Seed = &seed
		case "stop":
			for _, x := range v.([]any) {
				cr.Stop = append(cr.Stop, x.(string))
			}
		default:
			ollamaError(w, 400, "stand-in: unexpected option %q", k)
			return
		}
	}
	c, err := s.model.Complete(r.Context(), cr)
	if err != nil {
		ollamaError(w, 500, "%v", err)
		return
	}
	ch := c.Choices[0]
	resp := api.GenerateResponse{Model: req.Model, CreatedAt: time.Now(), Response: ch.Text, Done: true, DoneReason: ch.FinishReason}
	for i, id := range ch.TokenIDs {
		b := s.tok.TokenBytes(id)
		if s.tok.IsSpecial(id) {
			tk, _ := s.tok.IDToken(id)
			b = []byte(tk)
		}
		lp := api.Logprob{TokenLogprob: api.TokenLogprob{Token: string(b), Logprob: float64(ch.Logprobs[i])}}
		for _, c := range b {
			lp.Bytes = append(lp.Bytes, int(c))
		}
		resp.Logprobs = append(resp.Logprobs, lp)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

func (s *standIn) blob(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		ollamaError(w, 400, "%v", err)
		return
	}
	sum := sha256.Sum256(data)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != r.PathValue("digest") {
		ollamaError(w, 400, "digest mismatch, expected %q, got %q", r.PathValue("digest"), got)
		return
	}
	s.mu.Lock()
	s.blobs[r.PathValue("digest")] = data
	s.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
}

func (s *standIn) create(w http.ResponseWriter, r *http.Request) {
	var req api.CreateRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		ollamaError(w, 400, "%v", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.creates = append(s.creates, req)
	if req.From != s.Base {
		ollamaError(w, 404, "model '%s' not found", req.From)
		return
	}
	for file, d := range req.Adapters {
		if _, ok := s.blobs[d]; !ok {
			ollamaError(w, 400, "adapter %s: blob %s not found", file, d)
			return
		}
	}
	if s.noLoRA && len(req.Adapters) > 0 {
		ollamaError(w, 500, "loras are not yet implemented")
		return
	}
	s.models[req.Model] = req
	w.Header().Set("Content-Type", "application/x-ndjson")
	for _, st := range []string{"using existing layer", "writing manifest", "success"} {
		json.NewEncoder(w).Encode(api.ProgressResponse{Status: st})
	}
}

func (s *standIn) delete(w http.ResponseWriter, r *http.Request) {
	var req api.DeleteRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		ollamaError(w, 400, "%v", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.models[req.Model]; !ok {
		ollamaError(w, 404, "model '%s' not found", req.Model)
		return
	}
	delete(s.models, req.Model)
	s.deletes = append(s.deletes, req.Model)
}

// generateRequests returns the /api/generate bodies seen so far.
func (s *standIn) generateRequests() []api.GenerateRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]api.GenerateRequest(nil), s.requests...)
}
