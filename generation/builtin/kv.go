package builtin

// kvBlock holds keys and values for a run of positions, per layer, laid
// out [position][kv head][head_dim].
type kvBlock struct {
	k, v [][]float32 // per layer, len n*kvd, cap ≥ n*kvd
	n    int         // positions filled
}

// seqKV is one sequence's cache: a shared read-only prefix (the prompt's
// KV, computed once by the prefill and shared by the request's N samples)
// followed by the sequence's own positions. Only the scheduler goroutine
// touches it.
type seqKV struct {
	prefix *kvBlock // nil for the prefill sequence itself
	own    kvBlock
}

func newSeqKV(layers int, prefix *kvBlock) *seqKV {
	s := &seqKV{prefix: prefix}
	s.own.k = make([][]float32, layers)
	s.own.v = make([][]float32, layers)
	return s
}

func (s *seqKV) len() int {
	if s.prefix != nil {
		return s.prefix.n + s.own.n
	}
	return s.own.n
}

func (s *seqKV) prefixLen() int {
	if s.prefix != nil {
		return s.prefix.n
	}
	return 0
}

// reserve makes room for own positions up to total length n (prefix
// included) and marks them filled. Storage grows geometrically (at least
// 64 positions, at most limit) in one allocation for all layers, so
// decoding allocates rarely.
func (s *seqKV) reserve(n, kvd, limit int) {
	own := n - s.prefixLen()
	if own <= s.own.n {
		return
	}
	L := len(s.own.k)
	if c := cap(s.own.k[0]) / max(kvd, 1); own > c {
		newCap := max(own, min(max(2*c, 64), limit-s.prefixLen()))
		buf := make([]float32, 2*L*newCap*kvd)
		for l := range L {
			// Full slice expressions: each layer's capacity ends where the
			// next region starts, so growth is detected by cap and never
			// spills into a neighbour.
			k := buf[(2*l)*newCap*kvd : (2*l+1)*newCap*kvd : (2*l+1)*newCap*kvd]
			v := buf[(2*l+1)*newCap*kvd : (2*l+2)*newCap*kvd : (2*l+2)*newCap*kvd]
			copy(k, s.own.k[l])
			copy(v, s.own.v[l])
			s.own.k[l], s.own.v[l] = k[:0], v[:0]
		}
	}
	for l := range L {
		s.own.k[l] = s.own.k[l][:own*kvd]
		s.own.v[l] = s.own.v[l][:own*kvd]
	}
	s.own.n = own
}

// at returns the key and value rows (all kv heads) of position pos in
// layer l.
func (s *seqKV) at(l, pos, kvd int) (k, v []float32) {
	if p := s.prefix; p != nil {
		if pos < p.n {
			return p.k[l][pos*kvd : (pos+1)*kvd], p.v[l][pos*kvd : (pos+1)*kvd]
		}
		pos -= p.n
	}
	return s.own.k[l][pos*kvd : (pos+1)*kvd], s.own.v[l][pos*kvd : (pos+1)*kvd]
}
