// Package rng is the environments' pseudo-random generator: SplitMix64, fixed
// forever, so that an instance generated from a seed is the same on every Go
// version and machine (math/rand makes no such promise across releases).
// A Rand is not safe for concurrent use; make one per generation.
package rng

import "math/bits"

// Rand is a SplitMix64 generator.
type Rand struct{ s uint64 }

// New returns a generator for seed; stream separates independent uses of the
// same seed (e.g. one stream per environment).
func New(seed int64, stream uint64) *Rand {
	r := &Rand{s: uint64(seed)}
	r.s ^= stream * 0xD1B54A32D192ED03
	r.Uint64()
	return r
}

// Uint64 returns 64 random bits.
func (r *Rand) Uint64() uint64 {
	r.s += 0x9E3779B97F4A7C15
	z := r.s
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// IntN returns a uniform int in [0, n); it panics if n ≤ 0.
func (r *Rand) IntN(n int) int {
	if n <= 0 {
		panic("rng: IntN with n ≤ 0")
	}
	// Lemire's multiply-shift with rejection: unbiased.
	un := uint64(n)
	hi, lo := bits.Mul64(r.Uint64(), un)
	if lo < un {
		thresh := -un % un
		for lo < thresh {
			hi, lo = bits.Mul64(r.Uint64(), un)
		}
	}
	return int(hi)
}

// Float64 returns a uniform float64 in [0, 1).
func (r *Rand) Float64() float64 {
	return float64(r.Uint64()>>11) / (1 << 53)
}

// Shuffle permutes n elements with Fisher–Yates.
func (r *Rand) Shuffle(n int, swap func(i, j int)) {
	for i := n - 1; i > 0; i-- {
		swap(i, r.IntN(i+1))
	}
}

// Perm returns a random permutation of 0..n-1.
func (r *Rand) Perm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	r.Shuffle(n, func(i, j int) { p[i], p[j] = p[j], p[i] })
	return p
}
