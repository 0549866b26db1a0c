package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestBarLine(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Unix(0, 0)
	b := New(&buf, "rollout", "episodes", 10)
	b.now = func() time.Time { return clock }
	b.start = clock
	clock = clock.Add(2 * time.Second)
	b.Set(4, "calls 8")
	got := buf.String()
	for _, want := range []string{"rollout [########............] 4/10 episodes", "2.00/s", "ETA 3s", "calls 8"} {
		if !strings.Contains(got, want) {
			t.Errorf("line %q lacks %q", got, want)
		}
	}
	buf.Reset()
	b.Set(5, "") // within the redraw interval: nothing printed
	if buf.Len() != 0 {
		t.Errorf("redrew too soon: %q", buf.String())
	}
	b.Set(10, "")
	b.Finish()
	if !strings.Contains(buf.String(), "10/10") || strings.Contains(buf.String(), "ETA") {
		t.Errorf("final line %q", buf.String())
	}
}
