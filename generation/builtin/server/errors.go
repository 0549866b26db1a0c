package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/troupe-rl/troupe/generation/builtin"
)

// apiError is an error answered as OpenAI's error JSON:
// {"error":{"message","type","param","code"}} with an HTTP status.
type apiError struct {
	Status  int
	Type    string
	Param   string
	Code    string
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("server: %d %s", e.Status, e.Message) }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

func notFound(code, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: code, Message: fmt.Sprintf(format, args...)}
}

func unavailable(msg string) *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "service_unavailable", Message: msg}
}

func contextLength(param string, prompt, maxTokens, limit int) *apiError {
	return &apiError{
		Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Code: "context_length_exceeded",
		Message: fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the prompt, %d for the completion). Please reduce the prompt or max_tokens.",
			limit, prompt+maxTokens, prompt, maxTokens),
	}
}

var (
	errQueueFull = &apiError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "queue_full",
		Message: "the server's request queue is full; retry later"}
	errUnauthorized = &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
		Message: "missing or wrong API key: send it as 'Authorization: Bearer KEY'"}
	errLoading      = unavailable("the model is still loading; retry later")
	errShuttingDown = unavailable("the server is shutting down")
)

// toAPIError maps an engine (or other) error to an apiError.
func toAPIError(err error, param string) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, builtin.ErrQueueFull):
		return errQueueFull
	case errors.Is(err, builtin.ErrContextLength):
		return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Code: "context_length_exceeded", Message: err.Error()}
	case errors.Is(err, builtin.ErrUnknownAdapter):
		return notFound("model_not_found", "%v", err)
	case errors.Is(err, builtin.ErrBadRequest):
		return badRequest(param, "%v", err)
	case errors.Is(err, builtin.ErrClosed):
		return errShuttingDown
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client went away or the server is draining; the status is
		// rarely seen by anyone.
		return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "cancelled", Message: "request cancelled: " + err.Error()}
	}
	var bi interface{ BadInput() bool }
	if errors.As(err, &bi) && bi.BadInput() {
		return badRequest(param, "%v", err)
	}
	return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) body() errorBody {
	d := errorDetail{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		d.Param = &e.Param
	}
	if e.Code != "" {
		d.Code = &e.Code
	}
	return errorBody{Error: d}
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusServiceUnavailable || e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, e.body())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data = []byte(`{"error":{"message":"server: cannot encode the response","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}
