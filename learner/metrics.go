package learner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// MetricsWriter appends one JSON object per line to a metrics.jsonl file,
// syncing after each line so a crash loses at most the line being written.
type MetricsWriter struct {
	mu sync.Mutex
	f  *os.File
}

// OpenMetrics opens (creating, appending) path.
func OpenMetrics(path string) (*MetricsWriter, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("learner: metrics: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("learner: metrics: %w", err)
	}
	return &MetricsWriter{f: f}, nil
}

// Write appends v as one JSON line.
func (w *MetricsWriter) Write(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("learner: metrics: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("learner: metrics: %w", err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("learner: metrics: %w", err)
	}
	return nil
}

// Close closes the file.
func (w *MetricsWriter) Close() error { return w.f.Close() }
