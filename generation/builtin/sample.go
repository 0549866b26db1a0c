package builtin

import (
	"cmp"
	"container/heap"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/troupe-rl/troupe/generation/builtin/kernels"
)

// sampler is per-worker scratch for sampling; the decision itself depends
// only on the logits, the request's parameters and the sample's RNG.
type sampler struct {
	z    []float32 // exp(logits/T − max)
	cand []int32
	h    minHeap
}

type samplingParams struct {
	temperature, topP float64
	topK              int
}

// sample picks the next token from logits and returns it with its logprob
// under softmax(logits/T) (T=0 → T=1), untruncated. T=0 is greedy (lowest
// id on ties). With T>0, top-k keeps the k most likely tokens (lowest ids
// on ties), then top-p keeps the smallest most-likely-first prefix of those
// whose renormalised mass reaches p (Hugging Face's and vLLM's order).
func (s *sampler) sample(logits []float32, p samplingParams, rng *rand.Rand) (int32, float32) {
	V := len(logits)
	T := p.temperature
	if T <= 0 {
		T = 1
	}
	if cap(s.z) < V {
		s.z = make([]float32, V)
	}
	z := s.z[:V]
	lmax := logits[0]
	for _, v := range logits {
		lmax = max(lmax, v)
	}
	mx := float32(float64(lmax) / T)
	// z holds unnormalised probabilities.
	total := kernels.Exp(z, logits, float32(1/T), mx)
	if p.temperature <= 0 {
		best := 0
		for i, v := range logits {
			if v > logits[best] {
				best = i
			}
		}
		return int32(best), float32(float64(logits[best])/T - float64(mx) - math.Log(total))
	}
	tok := -1
	switch {
	case p.topK > 0 && p.topK < V || p.topP > 0 && p.topP < 1:
		s.candidates(z, total, p)
		c := s.cand
		var mass float64
		for _, i := range c {
			mass += float64(z[i])
		}
		if p.topP > 0 && p.topP < 1 {
			var cum float64
			keep := 0
			for _, i := range c {
				if cum >= p.topP*mass {
					break
				}
				cum += float64(z[i])
				keep++
			}
			c, mass = c[:keep], cum
		}
		u := rng.Float64() * mass
		tok = int(c[len(c)-1])
		for _, i := range c {
			u -= float64(z[i])
			if u < 0 {
				tok = int(i)
				break
			}
		}
	default:
		u := rng.Float64() * total
		tok = V - 1
		for i, e := range z {
			u -= float64(e)
			if u < 0 {
				tok = i
				break
			}
		}
	}
	lp := (float64(logits[tok])/T - float64(mx)) - math.Log(total)
	return int32(tok), float32(lp)
}

// candidates fills s.cand with the top-k tokens (or, with top-p only, a
// most-likely prefix holding at least p of the mass), sorted by
// probability descending, ids ascending on ties.
func (s *sampler) candidates(z []float32, total float64, p samplingParams) {
	s.cand = s.cand[:0]
	if p.topK > 0 && p.topK < len(z) {
		s.h = s.h[:0]
		for i, e := range z {
			if len(s.h) < p.topK {
				s.h = append(s.h, hItem{e, int32(i)})
				if len(s.h) == p.topK {
					heap.Init(&s.h)
				}
			} else if better(hItem{e, int32(i)}, s.h[0]) {
				s.h[0] = hItem{e, int32(i)}
				heap.Fix(&s.h, 0)
			}
		}
		for _, it := range s.h {
			s.cand = append(s.cand, it.i)
		}
	} else {
		// Halve a probability threshold until the tokens above it hold
		// at least p of the mass; the nucleus is a prefix of them.
		mx := float32(0)
		for _, e := range z {
			mx = max(mx, e)
		}
		for t := mx; ; t /= 2 {
			var mass float64
			s.cand = s.cand[:0]
			for i, e := range z {
				if e >= t {
					s.cand = append(s.cand, int32(i))
					mass += float64(e)
				}
			}
			if mass >= p.topP*total || t == 0 {
				break
			}
			if t < 1e-38 {
				t = 0
			}
		}
	}
	slices.SortFunc(s.cand, func(a, b int32) int {
		if c := cmp.Compare(z[b], z[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
}

type hItem struct {
	p float32
	i int32
}

// better orders by probability, then lower id.
func better(a, b hItem) bool { return a.p > b.p || a.p == b.p && a.i < b.i }

// minHeap keeps the worst kept candidate at the root.
type minHeap []hItem

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return better(h[j], h[i]) }
func (h minHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)        { *h = append(*h, x.(hItem)) }
func (h *minHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
