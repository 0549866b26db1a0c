// Package server is troupe's OpenAI-compatible HTTP server in front of the
// embedded engine (package builtin): what `troupe serve` runs and what
// every integration test talks to. It speaks the subset of vLLM's API that
// an RL loop needs:
//
//	GET  /health                     200 when a model is loaded, 503 while loading or shutting down
//	GET  /v1/models                  the base model and loaded adapters (vLLM's shape: root, parent, max_model_len)
//	POST /v1/completions             prompt as string, []string, []int or [][]int; n, max_tokens, temperature,
//	                                 top_p, top_k, seed, stop, logprobs, echo, stream, return_token_ids
//	POST /v1/chat/completions        messages rendered with the model's chat template; logprobs/top_logprobs,
//	                                 max_tokens/max_completion_tokens, chat_template_kwargs, return_token_ids, stream
//	POST /v1/load_lora_adapter       {"lora_name","lora_path","load_inplace"} → 200 "Success: LoRA adapter 'x' added successfully."
//	POST /v1/unload_lora_adapter     {"lora_name"} → 200 "Success: LoRA adapter 'x' removed successfully."
//	POST /tokenize, /detokenize      vLLM's shapes
//
// Chat prompts are rendered with the model's own chat_template (package
// chat, gonja) or, for models without one, ChatML; LoadOptions.ChatTemplate
// (serve --chat-template) can force a built-in renderer.
// chat_template_kwargs reach the template (enable_thinking: false writes
// Qwen3's empty think block); add_generation_prompt and
// continue_final_message work as in vLLM. Chat prompts get no extra BOS
// (the template writes it); completions prompts get one when the tokenizer
// adds it (add_special_tokens).
//
// A request's "model" selects the base model (its served name) or a loaded
// adapter by name; an unknown name is 404. As in vLLM, loading an adapter
// under a name that is already loaded fails (400) unless the request sets
// "load_inplace": true, which replaces it (requests in flight keep the
// version they started with); unloading an unknown name is 404.
//
// Errors are OpenAI's JSON ({"error":{"message","type","param","code"}}):
// 400 for bad JSON or parameters (param names the field) and for prompts
// that do not fit the context (code "context_length_exceeded"), 401 for a
// missing or wrong API key, 404 for an unknown model or adapter, 413 for a
// body over the limit, 429 when the queue is full, 503 while the model is
// loading or the server is shutting down.
//
// Logprobs are those of the sampled tokens under softmax(logits/T) without
// top-k/top-p truncation (what the learner recomputes; vLLM's
// processed-logprobs mode minus truncation). The engine computes no
// alternatives, so completions' top_logprobs is null and chat's
// top_logprobs lists are empty.
//
// Stop strings are matched on the incrementally decoded text, generation
// stops at the token that completes one, and the text is cut before it
// (as vLLM and OpenAI do); token_ids still hold every generated token.
package server
