package builtin

import (
	"math"

	"github.com/troupe-rl/troupe/generation/builtin/kernels"
)

// fwdRow is one token to run through the model: its id, its position in
// its sequence, the sequence's KV cache (position pos is written by this
// forward), the adapter for its sequence (nil = base), and whether its
// logits are wanted.
type fwdRow struct {
	tok    int32
	pos    int
	kv     *seqKV
	lora   *adapterVersion
	logits bool
}

// forwarder runs the model over a batch of rows with reusable scratch. It
// belongs to the scheduler goroutine (one forward at a time).
type forwarder struct {
	m    *model
	pool *pool
	loop loop

	rows                            []fwdRow
	h, xn, qkv, attn, gu, act, proj []float32
	cos, sin                        []float32
	scores                          [][]float32 // per worker
	logitRows                       []int
	fin, logits                     []float32
	loraGroups                      []loraGroup
	loraX, loraT, loraY             []float32
	ctxLimit                        int
}

type loraGroup struct {
	ad   *adapterVersion
	rows []int
}

func newForwarder(m *model, p *pool, ctxLimit int) *forwarder {
	f := &forwarder{m: m, pool: p, ctxLimit: ctxLimit}
	f.scores = make([][]float32, p.n)
	for i := range f.scores {
		f.scores[i] = make([]float32, ctxLimit)
	}
	return f
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n, n+n/4)
	}
	return s[:n]
}

// matmul computes y[:M, :L.out] (row stride ldy) = x[:M, :L.in]·Wᵀ + b, in
// parallel over output columns.
func (f *forwarder) matmul(y []float32, ldy int, x []float32, M int, L *linear) {
	grain := max(16, (L.out/(f.pool.n*8)+3)&^3)
	f.pool.parallelFor(&f.loop, L.out, grain, func(_, lo, hi int) {
		kernels.MatMulT(y, ldy, x, M, L.in, L.w, lo, hi)
		if L.b != nil {
			for m := 0; m < M; m++ {
				yr := y[m*ldy+lo : m*ldy+hi]
				for i, b := range L.b[lo:hi] {
					yr[i] += b
				}
			}
		}
	})
}

// rmsNorm writes x·rsqrt(mean(x²)+eps)·w into dst (Hugging Face's
// LlamaRMSNorm; the mean is accumulated in float64).
func rmsNorm(dst, x, w []float32, eps float64) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	r := float32(1 / math.Sqrt(ss/float64(len(x))+eps))
	for i, v := range x {
		dst[i] = w[i] * (v * r)
	}
}

// forward runs rows through the model and writes the logits of the rows
// with logits=true, in row order, into f.logits[i*vocab:]. Each row's KV
// entry at its position must already be reserved (seqKV.reserve).
func (f *forwarder) forward(rows []fwdRow) []float32 {
	m := f.m
	R := len(rows)
	d, hd, half := m.d, m.hd, m.hd/2
	qkvW := m.qd + 2*m.kvd
	f.h = grow(f.h, R*d)
	f.xn = grow(f.xn, R*d)
	f.qkv = grow(f.qkv, R*qkvW)
	f.attn = grow(f.attn, R*m.qd)
	f.proj = grow(f.proj, R*d)
	f.gu = grow(f.gu, R*2*m.ff)
	f.act = grow(f.act, R*m.ff)
	f.cos = grow(f.cos, R*half)
	f.sin = grow(f.sin, R*half)
	f.rows = rows
	f.groupLoRA(rows)

	for r, row := range rows {
		copy(f.h[r*d:(r+1)*d], m.embed[int(row.tok)*d:(int(row.tok)+1)*d])
		for i, inv := range m.invFreq {
			s, c := math.Sincos(float64(row.pos) * inv)
			f.cos[r*half+i], f.sin[r*half+i] = float32(c), float32(s)
		}
	}
	for l := range m.layers {
		L := &m.layers[l]
		for r := range R {
			rmsNorm(f.xn[r*d:(r+1)*d], f.h[r*d:(r+1)*d], L.inNorm, m.eps)
		}
		f.matmul(f.qkv, qkvW, f.xn, R, &L.qkv)
		f.applyLoRA(l, linQKV, f.qkv, qkvW, f.xn, d)
		// q/k norm, RoPE, and the cache write, per row.
		for r, row := range rows {
			base := f.qkv[r*qkvW : (r+1)*qkvW]
			cs, sn := f.cos[r*half:(r+1)*half], f.sin[r*half:(r+1)*half]
			for h := 0; h < m.nh+m.nkv; h++ {
				x := base[h*hd : (h+1)*hd]
				if L.qNorm != nil {
					if h < m.nh {
						rmsNorm(x, x, L.qNorm, m.eps)
					} else {
						rmsNorm(x, x, L.kNorm, m.eps)
					}
				}
				rope(x, cs, sn)
			}
			k, v := row.kv.at(l, row.pos, m.kvd)
			copy(k, base[m.qd:m.qd+m.kvd])
			copy(v, base[m.qd+m.kvd:])
		}
		f.attention(l)
		f.matmul(f.proj, d, f.attn, R, &L.o)
		f.applyLoRA(l, linO, f.proj, d, f.attn, m.qd)
		for i, v := range f.proj[:R*d] {
			f.h[i] += v
		}
		for r := range R {
			rmsNorm(f.xn[r*d:(r+1)*d], f.h[r*d:(r+1)*d], L.postNorm, m.eps)
		}
		f.matmul(f.gu, 2*m.ff, f.xn, R, &L.gateUp)
		f.applyLoRA(l, linGateUp, f.gu, 2*m.ff, f.xn, d)
		ff := m.ff
		for r := range R {
			g, u, a := f.gu[r*2*ff:r*2*ff+ff], f.gu[r*2*ff+ff:(r+1)*2*ff], f.act[r*ff:(r+1)*ff]
			for i, gv := range g {
				a[i] = gv / (1 + float32(math.Exp(float64(-gv)))) * u[i]
			}
		}
		f.matmul(f.proj, d, f.act, R, &L.down)
		f.applyLoRA(l, linDown, f.proj, d, f.act, ff)
		for i, v := range f.proj[:R*d] {
			f.h[i] += v
		}
	}
	f.logitRows = f.logitRows[:0]
	for r, row := range rows {
		if row.logits {
			f.logitRows = append(f.logitRows, r)
		}
	}
	n := len(f.logitRows)
	f.fin = grow(f.fin, n*d)
	for i, r := range f.logitRows {
		rmsNorm(f.fin[i*d:(i+1)*d], f.h[r*d:(r+1)*d], m.norm, m.eps)
	}
	f.logits = grow(f.logits, n*m.vocab)
	f.matmul(f.logits, m.vocab, f.fin, n, &m.lmHead)
	return f.logits[:n*m.vocab]
}

// rope rotates x in Hugging Face's rotate_half convention: element i pairs
// with i+hd/2.
func rope(x, cos, sin []float32) {
	h := len(x) / 2
	x1, x2 := x[:h], x[h:2*h]
	for i := range h {
		a, b := x1[i], x2[i]
		x1[i] = a*cos[i] - b*sin[i]
		x2[i] = b*cos[i] + a*sin[i]
	}
}

// attention computes causal grouped-query attention for every (row, head)
// into f.attn, in parallel.
func (f *forwarder) attention(l int) {
	m := f.m
	rows := f.rows
	qkvW := m.qd + 2*m.kvd
	rep := m.nh / m.nkv
	hd := m.hd
	f.pool.parallelFor(&f.loop, len(rows)*m.nh, max(1, m.nh/2), func(worker, lo, hi int) {
		sc := f.scores[worker]
		for t := lo; t < hi; t++ {
			r, h := t/m.nh, t%m.nh
			row := rows[r]
			q := f.qkv[r*qkvW+h*hd : r*qkvW+(h+1)*hd]
			g := h / rep
			n := row.pos + 1
			s := sc[:n]
			mx := float32(math.Inf(-1))
			for p := range n {
				k, _ := row.kv.at(l, p, m.kvd)
				v := kernels.Dot(q, k[g*hd:(g+1)*hd]) * m.scale
				s[p] = v
				mx = max(mx, v)
			}
			var sum float32
			for p, v := range s {
				e := float32(math.Exp(float64(v - mx)))
				s[p] = e
				sum += e
			}
			out := f.attn[r*m.qd+h*hd : r*m.qd+(h+1)*hd]
			clear(out)
			inv := 1 / sum
			for p, e := range s {
				_, v := row.kv.at(l, p, m.kvd)
				kernels.Axpy(e*inv, v[g*hd:(g+1)*hd], out)
			}
		}
	})
}
