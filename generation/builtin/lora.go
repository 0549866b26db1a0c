package builtin

import (
	"fmt"
	"strings"

	"github.com/troupe-rl/troupe/generation/builtin/kernels"
	"github.com/troupe-rl/troupe/internal/hf"
)

// loraMod is one module's factors placed within a fused linear's output:
// y[:, off:off+out] += scale·(x·Aᵀ)·Bᵀ with A [r, in], B [out, r].
type loraMod struct {
	a, b   linear
	off, r int
	scale  float32
}

// adapterVersion is an immutable loaded adapter. Requests hold a pointer to
// the version they started with, so replacing or unloading an adapter never
// changes a request in flight.
type adapterVersion struct {
	name   string
	dir    string
	layers [][numLin][]loraMod
}

// newAdapterVersion places a PEFT adapter's factors on the model.
func newAdapterVersion(m *model, name, dir string, a *hf.Adapter) (*adapterVersion, error) {
	av := &adapterVersion{name: name, dir: dir, layers: make([][numLin][]loraMod, len(m.layers))}
	s := float32(a.Config.Scaling())
	for l := range m.layers {
		for _, mod := range hf.AllModules {
			p, ok := a.Modules[hf.ModulePath(l, mod)]
			if !ok {
				continue
			}
			which, off, out, in := m.moduleSpan(mod)
			r := a.Config.R
			if p.A.Shape[1] != in || p.B.Shape[0] != out || p.A.Shape[0] != r || p.B.Shape[1] != r {
				return nil, fmt.Errorf("builtin: adapter %s: module %s: A %v, B %v do not fit [out=%d, in=%d]", dir, hf.ModulePath(l, mod), p.A.Shape, p.B.Shape, out, in)
			}
			av.layers[l][which] = append(av.layers[l][which], loraMod{
				a: linear{w: p.A.Data, in: in, out: r}, b: linear{w: p.B.Data, in: r, out: out},
				off: off, r: r, scale: s,
			})
		}
	}
	for path := range a.Modules {
		if !strings.HasPrefix(path, "model.layers.") {
			return nil, fmt.Errorf("builtin: adapter %s: module %s is not a decoder layer's linear", dir, path)
		}
	}
	return av, nil
}

// groupLoRA collects the rows of each adapter (first-seen order).
func (f *forwarder) groupLoRA(rows []fwdRow) {
	for i := range f.loraGroups {
		f.loraGroups[i].rows = f.loraGroups[i].rows[:0]
		f.loraGroups[i].ad = nil
	}
	n := 0
	for r, row := range rows {
		if row.lora == nil {
			continue
		}
		g := -1
		for i := range n {
			if f.loraGroups[i].ad == row.lora {
				g = i
				break
			}
		}
		if g < 0 {
			if n == len(f.loraGroups) {
				f.loraGroups = append(f.loraGroups, loraGroup{})
			}
			g = n
			f.loraGroups[g].ad = row.lora
			n++
		}
		f.loraGroups[g].rows = append(f.loraGroups[g].rows, r)
	}
	f.loraGroups = f.loraGroups[:n]
}

// applyLoRA adds each adapter's update for linear `which` of layer l to
// the rows of y (row stride ldy) of its group; x is the linear's input
// (row stride in).
func (f *forwarder) applyLoRA(l, which int, y []float32, ldy int, x []float32, in int) {
	for _, g := range f.loraGroups {
		mods := g.ad.layers[l][which]
		if len(mods) == 0 {
			continue
		}
		G := len(g.rows)
		f.loraX = grow(f.loraX, G*in)
		for i, r := range g.rows {
			copy(f.loraX[i*in:(i+1)*in], x[r*in:(r+1)*in])
		}
		for _, md := range mods {
			f.loraT = grow(f.loraT, G*md.r)
			kernels.MatMulT(f.loraT, md.r, f.loraX, G, in, md.a.w, 0, md.r)
			f.loraY = grow(f.loraY, G*md.b.out)
			f.matmul(f.loraY, md.b.out, f.loraT, G, &md.b)
			for i, r := range g.rows {
				dst := y[r*ldy+md.off : r*ldy+md.off+md.b.out]
				kernels.Axpy(md.scale, f.loraY[i*md.b.out:(i+1)*md.b.out], dst)
			}
		}
	}
}
