package tokenizer

import (
	"container/heap"
	"sync"
	"unicode/utf8"
)

// merge is the rank of a merge rule and the id of the token it produces.
type merge struct {
	rank int32
	id   int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// bpeModel is the BPE "model" part of a tokenizer: it turns one
// pre-tokenized word (raw bytes) into token ids.
type bpeModel struct {
	merges       map[uint64]merge
	byteLevel    bool       // words are mapped byte by byte through the ByteLevel alphabet
	byteIDs      [256]int32 // byte-level: id of each byte's rune, -1 if absent
	byteFB       [256]int32 // ids of <0x00>..<0xFF>, -1 if absent
	byteFallback bool
	vocab        map[string]int32 // token (as spelled in tokenizer.json) → id
	wordIDs      map[string]int32 // ignore_merges: raw word bytes → id
	ignoreMerges bool
	unk          int32 // -1 if none
	fuseUnk      bool
	cache        wordCache
}

const maxCachedWord = 256 // bytes; longer words are not cached

// encodeWord appends the ids of word to dst.
func (m *bpeModel) encodeWord(dst []int32, word string) []int32 {
	if word == "" {
		return dst
	}
	if m.ignoreMerges {
		if id, ok := m.wordIDs[word]; ok {
			return append(dst, id)
		}
	}
	cacheable := len(word) <= maxCachedWord
	if cacheable {
		if ids, ok := m.cache.get(word); ok {
			return append(dst, ids...)
		}
	}
	start := len(dst)
	dst = m.initialSymbols(dst, word)
	syms := dst[start:]
	n := m.mergeSymbols(syms)
	dst = dst[:start+n]
	if cacheable {
		m.cache.put(word, append([]int32(nil), dst[start:]...))
	}
	return dst
}

// initialSymbols appends the ids of the word's characters: its bytes'
// byte-level runes, or its runes; characters outside the vocabulary become
// <0xXX> byte tokens (byte_fallback), else the unknown token (fused if
// fuse_unk), else are dropped, as in Hugging Face tokenizers.
func (m *bpeModel) initialSymbols(dst []int32, word string) []int32 {
	if m.byteLevel {
		for i := 0; i < len(word); i++ {
			if id := m.byteIDs[word[i]]; id >= 0 {
				dst = append(dst, id)
				continue
			}
			var buf [4]byte
			n := utf8.EncodeRune(buf[:], byteToRune[word[i]])
			dst = m.unknownChar(dst, string(buf[:n]))
		}
		return dst
	}
	for i := 0; i < len(word); {
		_, w := decodeAt(word, i)
		ch := word[i : i+w]
		i += w
		if id, ok := m.vocab[ch]; ok {
			dst = append(dst, id)
			continue
		}
		dst = m.unknownChar(dst, ch)
	}
	return dst
}

func (m *bpeModel) unknownChar(dst []int32, ch string) []int32 {
	if m.byteFallback {
		ok := true
		for i := 0; i < len(ch); i++ {
			ok = ok && m.byteFB[ch[i]] >= 0
		}
		if ok {
			for i := 0; i < len(ch); i++ {
				dst = append(dst, m.byteFB[ch[i]])
			}
			return dst
		}
	}
	if m.unk < 0 {
		return dst
	}
	if m.fuseUnk && len(dst) > 0 && dst[len(dst)-1] == m.unk {
		return dst
	}
	return append(dst, m.unk)
}

const linearMergeLimit = 48 // symbols; longer words use a heap

// mergeSymbols applies merges in place and returns the new length. At each
// step the adjacent pair with the lowest merge rank is merged, the leftmost
// one on ties; this is exactly Hugging Face's priority-queue order.
func (m *bpeModel) mergeSymbols(s []int32) int {
	if len(s) < 2 {
		return len(s)
	}
	if len(s) > linearMergeLimit {
		return m.mergeHeap(s)
	}
	const none = int32(1<<31 - 1)
	var rbuf [linearMergeLimit]int32
	var ibuf [linearMergeLimit]int32
	ranks, ids := rbuf[:len(s)-1], ibuf[:len(s)-1]
	for i := range ranks {
		if mg, ok := m.merges[pairKey(s[i], s[i+1])]; ok {
			ranks[i], ids[i] = mg.rank, mg.id
		} else {
			ranks[i] = none
		}
	}
	n := len(s)
	for n > 1 {
		best := -1
		br := none
		for i := 0; i < n-1; i++ {
			if ranks[i] < br {
				br, best = ranks[i], i
			}
		}
		if best < 0 {
			break
		}
		s[best] = ids[best]
		copy(s[best+1:n-1], s[best+2:n])
		copy(ranks[best:n-2], ranks[best+1:n-1])
		copy(ids[best:n-2], ids[best+1:n-1])
		n--
		if best > 0 {
			if mg, ok := m.merges[pairKey(s[best-1], s[best])]; ok {
				ranks[best-1], ids[best-1] = mg.rank, mg.id
			} else {
				ranks[best-1] = none
			}
		}
		if best < n-1 {
			if mg, ok := m.merges[pairKey(s[best], s[best+1])]; ok {
				ranks[best], ids[best] = mg.rank, mg.id
			} else {
				ranks[best] = none
			}
		}
	}
	return n
}

type candidate struct {
	rank int32
	pos  int32 // index of the left symbol
	id   int32 // merged token id
}

type candHeap []candidate

func (h candHeap) Len() int { return len(h) }
func (h candHeap) Less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].pos < h[j].pos
}
func (h candHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *candHeap) Push(x any)   { *h = append(*h, x.(candidate)) }
func (h *candHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// mergeHeap is mergeSymbols for long words: O(n log n) with a linked list
// and a priority queue of (rank, position), as Hugging Face's word.rs does.
func (m *bpeModel) mergeHeap(s []int32) int {
	n := len(s)
	prev := make([]int32, n)
	next := make([]int32, n)
	alive := make([]bool, n)
	for i := range s {
		prev[i], next[i], alive[i] = int32(i-1), int32(i+1), true
	}
	next[n-1] = -1
	h := make(candHeap, 0, n)
	for i := 0; i < n-1; i++ {
		if mg, ok := m.merges[pairKey(s[i], s[i+1])]; ok {
			h = append(h, candidate{mg.rank, int32(i), mg.id})
		}
	}
	heap.Init(&h)
	for h.Len() > 0 {
		c := heap.Pop(&h).(candidate)
		p := c.pos
		if !alive[p] || next[p] < 0 {
			continue
		}
		q := next[p]
		if mg, ok := m.merges[pairKey(s[p], s[q])]; !ok || mg.id != c.id || mg.rank != c.rank {
			continue
		}
		s[p] = c.id
		alive[q] = false
		next[p] = next[q]
		if next[q] >= 0 {
			prev[next[q]] = p
		}
		if pp := prev[p]; pp >= 0 {
			if mg, ok := m.merges[pairKey(s[pp], s[p])]; ok {
				heap.Push(&h, candidate{mg.rank, pp, mg.id})
			}
		}
		if nn := next[p]; nn >= 0 {
			if mg, ok := m.merges[pairKey(s[p], s[nn])]; ok {
				heap.Push(&h, candidate{mg.rank, p, mg.id})
			}
		}
	}
	k := 0
	for i := 0; i >= 0; i = int(next[i]) {
		s[k] = s[i]
		k++
	}
	return k
}

// wordCache memoises BPE results per word. It is sharded to keep lock
// contention low under concurrent Encode calls; a full shard is cleared.
type wordCache struct {
	shards [32]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[string][]int32
}

const cacheShardCap = 8192

// shard picks a shard from a cheap mix of length and edge bytes (the map
// inside hashes the whole word anyway).
func (c *wordCache) shard(word string) *cacheShard {
	h := uint(len(word))*0x9E3779B1 ^ uint(word[0])*31 ^ uint(word[len(word)-1])*131
	if len(word) > 2 {
		h ^= uint(word[1]) * 7
	}
	return &c.shards[(h^h>>7)%uint(len(c.shards))]
}

func (c *wordCache) get(word string) ([]int32, bool) {
	sh := c.shard(word)
	sh.mu.RLock()
	ids, ok := sh.m[word]
	sh.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(word string, ids []int32) {
	sh := c.shard(word)
	sh.mu.Lock()
	if sh.m == nil || len(sh.m) >= cacheShardCap {
		sh.m = make(map[string][]int32, 256)
	}
	sh.m[word] = ids
	sh.mu.Unlock()
}
