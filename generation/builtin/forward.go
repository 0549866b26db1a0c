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
// belongs to the scheduler goroutine (one forward at a time). The parallel
// loop bodies are method values bound once and read their arguments from
// the forwarder's fields, so a decode step does not allocate.
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

	// Arguments of the loop bodies.
	layer int
	norm  []float32 // the RMSNorm weight for rowsNorm
	mmY   []float32
	mmLdy int
	mmX   []float32
	mmM   int
	mmL   *linear

	fnMatmul, fnEmbed, fnNorm, fnQKV, fnAttn, fnResNorm, fnAct, fnRes func(worker, lo, hi int)
}

type loraGroup struct {
	ad   *adapterVersion
	rows []int
}

func newForwarder(m *model, p *pool, ctxLimit int) *forwarder {
	f := &forwarder{m: m, pool: p}
	f.scores = make([][]float32, p.n)
	for i := range f.scores {
		f.scores[i] = make([]float32, ctxLimit)
	}
	f.fnMatmul, f.fnEmbed, f.fnNorm, f.fnQKV = f.matmulRange, f.embedRows, f.normRows, f.qkvRows
	f.fnAttn, f.fnResNorm, f.fnAct, f.fnRes = f.attnRange, f.residualNormRows, f.actRows, f.residualRows
	return f
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n, n+n/4)
	}
	return s[:n]
}

// rowGrain splits R rows into a few chunks per worker.
func (f *forwarder) rowGrain(R int) int { return max(1, R/(2*f.pool.n)) }

// matmul computes y[:M, :L.out] (row stride ldy) = x[:M, :L.in]·Wᵀ + b, in
// parallel over output columns.
func (f *forwarder) matmul(y []float32, ldy int, x []float32, M int, L *linear) {
	if M == 0 {
		return
	}
	f.mmY, f.mmLdy, f.mmX, f.mmM, f.mmL = y, ldy, x, M, L
	grain := max(16, (L.out/(f.pool.n*8)+3)&^3)
	f.pool.parallelFor(&f.loop, L.out, grain, f.fnMatmul)
	f.mmY, f.mmX, f.mmL = nil, nil, nil
}

func (f *forwarder) matmulRange(_, lo, hi int) {
	y, ldy, M, L := f.mmY, f.mmLdy, f.mmM, f.mmL
	kernels.MatMulT(y, ldy, f.mmX, M, L.in, L.w, lo, hi)
	if L.b != nil {
		for m := 0; m < M; m++ {
			yr := y[m*ldy+lo : m*ldy+hi]
			for i, b := range L.b[lo:hi] {
				yr[i] += b
			}
		}
	}
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

// forward runs rows through the model and returns the logits of the rows
// with logits=true, in row order ([n, vocab], valid until the next call).
// Each row's KV entry at its position must already be reserved.
func (f *forwarder) forward(rows []fwdRow) []float32 {
	m := f.m
	R := len(rows)
	d := m.d
	qkvW := m.qd + 2*m.kvd
	f.h = grow(f.h, R*d)
	f.xn = grow(f.xn, R*d)
	f.qkv = grow(f.qkv, R*qkvW)
	f.attn = grow(f.attn, R*m.qd)
	f.proj = grow(f.proj, R*d)
	f.gu = grow(f.gu, R*2*m.ff)
	f.act = grow(f.act, R*m.ff)
	f.cos = grow(f.cos, R*m.hd/2)
	f.sin = grow(f.sin, R*m.hd/2)
	f.rows = rows
	f.groupLoRA(rows)
	g := f.rowGrain(R)

	f.pool.parallelFor(&f.loop, R, g, f.fnEmbed)
	for l := range m.layers {
		L := &m.layers[l]
		f.layer = l
		if l == 0 {
			f.norm = L.inNorm
			f.pool.parallelFor(&f.loop, R, g, f.fnNorm)
		}
		f.matmul(f.qkv, qkvW, f.xn, R, &L.qkv)
		f.applyLoRA(l, linQKV, f.qkv, qkvW, f.xn, d)
		f.pool.parallelFor(&f.loop, R, g, f.fnQKV)
		f.pool.parallelFor(&f.loop, R*m.nkv, max(1, R*m.nkv/(4*f.pool.n)), f.fnAttn)
		f.matmul(f.proj, d, f.attn, R, &L.o)
		f.applyLoRA(l, linO, f.proj, d, f.attn, m.qd)
		f.norm = L.postNorm
		f.pool.parallelFor(&f.loop, R, g, f.fnResNorm)
		f.matmul(f.gu, 2*m.ff, f.xn, R, &L.gateUp)
		f.applyLoRA(l, linGateUp, f.gu, 2*m.ff, f.xn, d)
		f.pool.parallelFor(&f.loop, R, g, f.fnAct)
		f.matmul(f.proj, d, f.act, R, &L.down)
		f.applyLoRA(l, linDown, f.proj, d, f.act, m.ff)
		f.norm = nil
		if l+1 < len(m.layers) {
			f.norm = m.layers[l+1].inNorm
		}
		f.pool.parallelFor(&f.loop, R, g, f.fnRes)
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
	f.rows = nil
	return f.logits[:n*m.vocab]
}

// embedRows looks up token embeddings and the rows' RoPE angles.
func (f *forwarder) embedRows(_, lo, hi int) {
	m := f.m
	d, half := m.d, m.hd/2
	for r := lo; r < hi; r++ {
		row := f.rows[r]
		copy(f.h[r*d:(r+1)*d], m.embed[int(row.tok)*d:(int(row.tok)+1)*d])
		for i, inv := range m.invFreq {
			s, c := math.Sincos(float64(row.pos) * inv)
			f.cos[r*half+i], f.sin[r*half+i] = float32(c), float32(s)
		}
	}
}

// normRows: xn = RMSNorm(h)·f.norm.
func (f *forwarder) normRows(_, lo, hi int) {
	d := f.m.d
	for r := lo; r < hi; r++ {
		rmsNorm(f.xn[r*d:(r+1)*d], f.h[r*d:(r+1)*d], f.norm, f.m.eps)
	}
}

// residualNormRows: h += proj; xn = RMSNorm(h)·f.norm.
func (f *forwarder) residualNormRows(_, lo, hi int) {
	d := f.m.d
	for r := lo; r < hi; r++ {
		h := f.h[r*d : (r+1)*d]
		kernels.Axpy(1, f.proj[r*d:(r+1)*d], h)
		rmsNorm(f.xn[r*d:(r+1)*d], h, f.norm, f.m.eps)
	}
}

// residualRows: h += proj, then the next layer's input norm if any.
func (f *forwarder) residualRows(_, lo, hi int) {
	d := f.m.d
	for r := lo; r < hi; r++ {
		h := f.h[r*d : (r+1)*d]
		kernels.Axpy(1, f.proj[r*d:(r+1)*d], h)
		if f.norm != nil {
			rmsNorm(f.xn[r*d:(r+1)*d], h, f.norm, f.m.eps)
		}
	}
}

// actRows: act = silu(gate)·up.
func (f *forwarder) actRows(_, lo, hi int) {
	ff := f.m.ff
	for r := lo; r < hi; r++ {
		gu := f.gu[r*2*ff : (r+1)*2*ff]
		kernels.SiLUMul(f.act[r*ff:(r+1)*ff], gu[:ff], gu[ff:])
	}
}

// qkvRows applies q/k norm (Qwen3) and RoPE and writes k, v to the cache.
func (f *forwarder) qkvRows(_, lo, hi int) {
	m := f.m
	L := &m.layers[f.layer]
	hd, half := m.hd, m.hd/2
	qkvW := m.qd + 2*m.kvd
	for r := lo; r < hi; r++ {
		row := f.rows[r]
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
		k, v := row.kv.at(f.layer, row.pos, m.kvd)
		copy(k, base[m.qd:m.qd+m.kvd])
		copy(v, base[m.qd+m.kvd:])
	}
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

// attnRange computes causal grouped-query attention for tasks (row, kv
// head) in [lo, hi): every query head of the group, over positions 0..pos.
func (f *forwarder) attnRange(worker, lo, hi int) {
	m := f.m
	l := f.layer
	qkvW := m.qd + 2*m.kvd
	rep := m.nh / m.nkv
	hd := m.hd
	sc := f.scores[worker]
	for t := lo; t < hi; t++ {
		r, g := t/m.nkv, t%m.nkv
		row := f.rows[r]
		n := row.pos + 1
		s := sc[:n]
		for h := g * rep; h < (g+1)*rep; h++ {
			q := f.qkv[r*qkvW+h*hd : r*qkvW+(h+1)*hd]
			mx := float32(math.Inf(-1))
			for p := range n {
				k, _ := row.kv.at(l, p, m.kvd)
				v := kernels.Dot(q, k[g*hd:(g+1)*hd]) * m.scale
				s[p] = v
				mx = max(mx, v)
			}
			inv := float32(1 / kernels.Exp(s, s, 1, mx))
			out := f.attn[r*m.qd+h*hd : r*m.qd+(h+1)*hd]
			clear(out)
			for p, e := range s {
				_, v := row.kv.at(l, p, m.kvd)
				kernels.Axpy(e*inv, v[g*hd:(g+1)*hd], out)
			}
		}
	}
}
