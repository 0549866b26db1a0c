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
// included), growing geometrically up to limit so that decoding allocates
// rarely; then marks them filled.
func (s *seqKV) reserve(n, kvd, limit int) {
	own := n - s.prefixLen()
	if own <= s.own.n {
		return
	}
	if c := cap(s.own.k[0]) / max(kvd, 1); own > c || s.own.k[0] == nil {
		newCap := max(own, min(2*c, limit-s.prefixLen()), 16)
		for l := range s.own.k {
			k := make([]float32, s.own.n*kvd, newCap*kvd)
			copy(k, s.own.k[l])
			v := make([]float32, s.own.n*kvd, newCap*kvd)
			copy(v, s.own.v[l])
			s.own.k[l], s.own.v[l] = k, v
		}
	}
	for l := range s.own.k {
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
