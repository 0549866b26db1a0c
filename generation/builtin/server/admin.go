package server

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"

	"github.com/troupe-rl/troupe/generation/builtin"
)

type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}

type modelCard struct {
	ID          string  `json:"id"`
	Object      string  `json:"object"`
	Created     int64   `json:"created"`
	OwnedBy     string  `json:"owned_by"`
	Root        string  `json:"root"`
	Parent      *string `json:"parent"`
	MaxModelLen int     `json:"max_model_len"`
	Permission  []any   `json:"permission"`
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request, m *Model) {
	ctxLen := m.Engine.ContextLength()
	list := modelList{Object: "list", Data: []modelCard{{
		ID: m.Name, Object: "model", Created: s.created, OwnedBy: "troupe", Root: m.Root, MaxModelLen: ctxLen, Permission: []any{},
	}}}
	names := m.Engine.Adapters()
	slices.Sort(names)
	for _, name := range names {
		root := ""
		if p, ok := s.adapterPaths.Load(name); ok {
			root = p.(string)
		}
		parent := m.Name
		list.Data = append(list.Data, modelCard{ID: name, Object: "model", Created: s.created, OwnedBy: "troupe",
			Root: root, Parent: &parent, MaxModelLen: ctxLen, Permission: []any{}})
	}
	writeJSON(w, http.StatusOK, list)
}

func writeText(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	w.Write([]byte(text))
}

// handleLoadAdapter is vLLM's POST /v1/load_lora_adapter. As in vLLM, a
// name already loaded is refused (400) unless load_inplace is true, in
// which case the adapter is replaced.
func (s *Server) handleLoadAdapter(w http.ResponseWriter, r *http.Request, m *Model) {
	var req adapterLoadRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.LoRAName == "" || req.LoRAPath == "" {
		writeError(w, badRequest("lora_name", "Both 'lora_name' and 'lora_path' must be provided."))
		return
	}
	if req.LoRAName == m.Name {
		writeError(w, badRequest("lora_name", "The lora adapter name '%s' is the served base model's name.", req.LoRAName))
		return
	}
	s.adapterMu.Lock()
	defer s.adapterMu.Unlock()
	if !req.LoadInplace && slices.Contains(m.Engine.Adapters(), req.LoRAName) {
		writeError(w, badRequest("lora_name", "The lora adapter '%s' has already been loaded. Unload it first, or set load_inplace: true to replace it.", req.LoRAName))
		return
	}
	path := req.LoRAPath
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if _, err := os.Stat(path); err != nil {
		writeError(w, notFound("adapter_not_found", "cannot read the lora adapter at '%s': %v", req.LoRAPath, errors.Unwrap(err)))
		return
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	if err := m.Engine.LoadAdapter(ctx, req.LoRAName, path); err != nil {
		e := toAPIError(err, "lora_path")
		if e.Status == http.StatusInternalServerError {
			e = badRequest("lora_path", "cannot load the lora adapter '%s' from '%s': %v", req.LoRAName, req.LoRAPath, err)
		}
		writeError(w, e)
		return
	}
	s.adapterPaths.Store(req.LoRAName, path)
	s.log.Info("server: adapter loaded", "name", req.LoRAName, "path", path, "inplace", req.LoadInplace)
	writeText(w, http.StatusOK, fmt.Sprintf("Success: LoRA adapter '%s' added successfully.", req.LoRAName))
}

// handleUnloadAdapter is vLLM's POST /v1/unload_lora_adapter.
func (s *Server) handleUnloadAdapter(w http.ResponseWriter, r *http.Request, m *Model) {
	var req adapterUnloadRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.LoRAName == "" {
		writeError(w, badRequest("lora_name", "'lora_name' needs to be provided to unload a LoRA adapter."))
		return
	}
	s.adapterMu.Lock()
	defer s.adapterMu.Unlock()
	if !slices.Contains(m.Engine.Adapters(), req.LoRAName) {
		writeError(w, notFound("adapter_not_found", "The lora adapter '%s' cannot be found.", req.LoRAName))
		return
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	if err := m.Engine.UnloadAdapter(ctx, req.LoRAName); err != nil {
		if errors.Is(err, builtin.ErrUnknownAdapter) {
			writeError(w, notFound("adapter_not_found", "The lora adapter '%s' cannot be found.", req.LoRAName))
			return
		}
		writeError(w, toAPIError(err, "lora_name"))
		return
	}
	s.adapterPaths.Delete(req.LoRAName)
	s.log.Info("server: adapter unloaded", "name", req.LoRAName)
	writeText(w, http.StatusOK, fmt.Sprintf("Success: LoRA adapter '%s' removed successfully.", req.LoRAName))
}

type tokenizeResponse struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []int32  `json:"tokens"`
	TokenStrs   []string `json:"token_strs,omitempty"`
}

// handleTokenize is vLLM's POST /tokenize, in its completion form
// ({prompt, add_special_tokens}) or chat form ({messages, ...}).
func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request, m *Model) {
	var req tokenizeRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if _, e := m.resolveModel(req.Model); e != nil {
		writeError(w, e)
		return
	}
	var ids []int32
	switch {
	case req.Messages != nil && req.Prompt != nil:
		writeError(w, badRequest("prompt", "send either prompt or messages, not both"))
		return
	case req.Messages != nil:
		var e *apiError
		ids, e = renderChat(m, req.Messages, req.AddGenerationPrompt, req.ContinueFinalMessage, nil, req.ChatTemplateKwargs)
		if e != nil {
			writeError(w, e)
			return
		}
		if req.AddSpecialTokens != nil && *req.AddSpecialTokens {
			// vLLM's chat default is false; honour an explicit true.
			ids = addSpecial(m.Tokenizer, ids)
		}
	case req.Prompt != nil:
		ids = m.Tokenizer.Encode(*req.Prompt, req.AddSpecialTokens == nil || *req.AddSpecialTokens)
	default:
		writeError(w, badRequest("prompt", "prompt or messages is required"))
		return
	}
	resp := tokenizeResponse{Count: len(ids), MaxModelLen: m.Engine.ContextLength(), Tokens: nonNil(ids)}
	if req.ReturnTokenStrs {
		resp.TokenStrs = make([]string, len(ids))
		for i, id := range ids {
			resp.TokenStrs[i] = m.Tokenizer.Decode([]int32{id}, false)
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// addSpecial prepends what Encode(…, true) adds in front of a text.
func addSpecial(t Tokenizer, ids []int32) []int32 {
	with, without := t.Encode("", true), t.Encode("", false)
	if len(with) > len(without) {
		return append(append([]int32(nil), with[:len(with)-len(without)]...), ids...)
	}
	return ids
}

// handleDetokenize is vLLM's POST /detokenize.
func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request, m *Model) {
	var req detokenizeRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if _, e := m.resolveModel(req.Model); e != nil {
		writeError(w, e)
		return
	}
	ids, err := toInt32s(req.Tokens)
	if err != nil {
		writeError(w, badRequest("tokens", "%v", err))
		return
	}
	vocab := m.Engine.VocabSize()
	for _, id := range ids {
		if int(id) >= vocab {
			writeError(w, badRequest("tokens", "token id %d is out of the vocabulary (size %d)", id, vocab))
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"prompt": m.Tokenizer.Decode(ids, false)})
}
