package learner

import (
	"math"
	"testing"
)

func TestLRAt(t *testing.T) {
	tests := []struct {
		t, warmup, total int
		want             float64
	}{
		{1, 10, 0, 0.1},
		{10, 10, 0, 1},
		{500, 10, 0, 1},
		{10, 10, 110, 1},
		{60, 10, 110, 0.3 + 0.7*0.5},
		{110, 10, 110, 0.3},
		{200, 10, 110, 0.3},
		{1, 0, 0, 1},
	}
	for _, tc := range tests {
		if got := LRAt(tc.t, 1, tc.warmup, tc.total, 0.3); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("LRAt(%d, warmup %d, total %d) = %v, want %v", tc.t, tc.warmup, tc.total, got, tc.want)
		}
	}
}

func TestClipGlobalNorm(t *testing.T) {
	g := [][]float64{{3}, {4}}
	if n := ClipGlobalNorm(g, 1); n != 5 {
		t.Fatalf("norm %v", n)
	}
	if n := GlobalNorm(g); math.Abs(n-1) > 1e-6 {
		t.Errorf("clipped norm %v", n)
	}
	g = [][]float64{{0.3}, {0.4}}
	ClipGlobalNorm(g, 1)
	if g[0][0] != 0.3 {
		t.Errorf("small gradient changed: %v", g)
	}
}

// TestAdamWMatchesTorch: the first two steps of torch.optim.AdamW(lr=0.1,
// betas=(0.9,0.999), eps=1e-8, weight_decay=0.01) on p=[1, -2] with
// gradients [0.5, -1] then [0.1, 0.2] (values computed by hand from the
// update rule, which torch documents).
func TestAdamWMatchesTorch(t *testing.T) {
	p := [][]float32{{1, -2}}
	o := NewAdamW(p, 0.9, 0.999, 1e-8, 0.01)
	o.Step(p, [][]float64{{0.5, -1}}, 0.1)
	// Step 1: p·(1−0.001) − 0.1·sign(g) (m̂/√v̂ = ±1).
	want := []float64{1*0.999 - 0.1, -2*0.999 + 0.1}
	for i := range want {
		if math.Abs(float64(p[0][i])-want[i]) > 1e-6 {
			t.Errorf("step 1 p[%d] = %v, want %v", i, p[0][i], want[i])
		}
	}
	o.Step(p, [][]float64{{0.1, 0.2}}, 0.1)
	for i, g2 := range []float64{0.1, 0.2} {
		g1 := []float64{0.5, -1}[i]
		m := 0.9*0.1*g1 + 0.1*g2
		v := 0.999*0.001*g1*g1 + 0.001*g2*g2
		mh, vh := m/(1-0.81), v/(1-0.999*0.999)
		w := want[i]*0.999 - 0.1*mh/(math.Sqrt(vh)+1e-8)
		if math.Abs(float64(p[0][i])-w) > 1e-5 {
			t.Errorf("step 2 p[%d] = %v, want %v", i, p[0][i], w)
		}
	}
}
