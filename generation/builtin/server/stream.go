package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
)

// sseWriter writes server-sent events ("data: JSON\n\n"), flushing each.
// Headers go out with the first event, so an error that happens before
// any output can still be answered with a proper status.
type sseWriter struct {
	w       http.ResponseWriter
	started bool
}

func (s *sseWriter) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// send writes v as one event.
func (s *sseWriter) send(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("server: encode event: %w", err)
	}
	return s.raw(data)
}

func (s *sseWriter) raw(data []byte) error {
	s.start()
	buf := make([]byte, 0, len(data)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := s.w.Write(buf); err != nil {
		return err
	}
	http.NewResponseController(s.w).Flush()
	return nil
}

// done writes the terminating "data: [DONE]".
func (s *sseWriter) done() error { return s.raw([]byte("[DONE]")) }

// fail reports err: as a JSON error response if nothing was sent yet, else
// as an error event followed by [DONE] (what vLLM does mid-stream).
func (s *sseWriter) fail(e *apiError) {
	if !s.started {
		writeError(s.w, e)
		return
	}
	s.send(e.body())
	s.done()
}

// pieceQueue is an unbounded queue of pieces: the engine's decode loop
// pushes without ever blocking on a slow client; the handler drains.
type pieceQueue struct {
	mu     sync.Mutex
	items  []*piece
	errs   []error
	ready  chan struct{}
	active int // producers still running
}

func newPieceQueue(producers int) *pieceQueue {
	return &pieceQueue{ready: make(chan struct{}, 1), active: producers}
}

func (q *pieceQueue) push(pc *piece) {
	q.mu.Lock()
	q.items = append(q.items, pc)
	q.mu.Unlock()
	q.wake()
}

// finish marks one producer done (with its final pieces or an error).
func (q *pieceQueue) finish(final []*piece, err error) {
	q.mu.Lock()
	q.items = append(q.items, final...)
	if err != nil {
		q.errs = append(q.errs, err)
	}
	q.active--
	q.mu.Unlock()
	q.wake()
}

func (q *pieceQueue) wake() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// next waits for pieces; it returns them, the first error, and whether all
// producers are done and the queue is drained.
func (q *pieceQueue) next(ctx context.Context) ([]*piece, error, bool) {
	for {
		q.mu.Lock()
		items, active := q.items, q.active
		var err error
		if len(q.errs) > 0 {
			err = q.errs[0]
		}
		q.items = nil
		q.mu.Unlock()
		if len(items) > 0 || err != nil || active == 0 {
			return items, err, active == 0
		}
		select {
		case <-q.ready:
		case <-ctx.Done():
			return nil, ctx.Err(), true
		}
	}
}
