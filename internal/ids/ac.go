package ids

import "fmt"

// acMatcher is an Aho–Corasick automaton compiled to a DFA over a reduced
// alphabet: bytes are case-folded (ASCII) and mapped to classes, bytes that
// occur in no pattern sharing class 0. A transition holds the target
// state's row offset (state*nclass), so the scan loop does one add and one
// load per byte; a negative entry (^offset) means the target state has
// outputs, so the loop tests one sign bit per byte.
type acMatcher struct {
	class    [256]uint8
	stay     [256]bool // the byte leaves the automaton at the root
	nclass   int
	delta    []int32 // row offset + class -> next row offset (negative: has output)
	outStart []int32 // per state: outputs are outs[outStart[s]:outStart[s+1]]
	outs     []int32 // pattern ids
	plen     []int32 // pattern id -> length
}

var foldTable = func() (t [256]byte) {
	for i := range t {
		c := byte(i)
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		t[i] = c
	}
	return
}()

// maxACCells bounds the DFA table (states × classes) so row offsets fit
// an int32; about 2^31 cells would be 8 GiB anyway.
const maxACCells = 1 << 28

// newACMatcher builds the automaton; patterns must be non-empty and are
// matched case-insensitively.
func newACMatcher(patterns [][]byte) (*acMatcher, error) {
	m := &acMatcher{}
	// Alphabet classes.
	var used [256]bool
	for _, p := range patterns {
		for _, c := range p {
			used[foldTable[c]] = true
		}
	}
	m.nclass = 1
	var cls [256]uint8
	for c := 0; c < 256; c++ {
		if used[c] {
			cls[c] = uint8(m.nclass)
			m.nclass++
		}
	}
	if m.nclass > 256 {
		// 255 distinct folded bytes + class 0 cannot exceed 256 (uppercase
		// letters fold away), but keep the invariant explicit.
		panic("ids: alphabet overflow")
	}
	for c := 0; c < 256; c++ {
		m.class[c] = cls[foldTable[c]]
	}

	// Trie with sparse goto (map per state while building).
	type node struct {
		next map[uint8]int32
		fail int32
		out  []int32
	}
	nodes := []node{{next: map[uint8]int32{}}}
	m.plen = make([]int32, len(patterns))
	for id, p := range patterns {
		m.plen[id] = int32(len(p))
		s := int32(0)
		for _, c := range p {
			k := m.class[c]
			nx, ok := nodes[s].next[k]
			if !ok {
				nx = int32(len(nodes))
				nodes = append(nodes, node{next: map[uint8]int32{}})
				nodes[s].next[k] = nx
			}
			s = nx
		}
		nodes[s].out = append(nodes[s].out, int32(id))
	}

	// BFS: failure links, merged outputs, full DFA rows.
	n := len(nodes)
	nc := m.nclass
	if n*nc > maxACCells {
		return nil, fmt.Errorf("pattern automaton needs %d states × %d byte classes, more than %d cells", n, nc, maxACCells)
	}
	m.delta = make([]int32, n*nc)
	queue := make([]int32, 0, n)
	for k := 0; k < nc; k++ {
		if nx, ok := nodes[0].next[uint8(k)]; ok {
			nodes[nx].fail = 0
			m.delta[k] = nx
			queue = append(queue, nx)
		}
	}
	for qi := 0; qi < len(queue); qi++ {
		s := queue[qi]
		f := nodes[s].fail
		nodes[s].out = append(nodes[s].out, nodes[f].out...)
		for k := 0; k < nc; k++ {
			if nx, ok := nodes[s].next[uint8(k)]; ok {
				nodes[nx].fail = m.delta[int(f)*nc+k]
				m.delta[int(s)*nc+k] = nx
				queue = append(queue, nx)
			} else {
				m.delta[int(s)*nc+k] = m.delta[int(f)*nc+k]
			}
		}
	}
	// Outputs and sign-marked transitions.
	m.outStart = make([]int32, n+1)
	for s := 0; s < n; s++ {
		m.outStart[s] = int32(len(m.outs))
		m.outs = append(m.outs, nodes[s].out...)
	}
	m.outStart[n] = int32(len(m.outs))
	for c := 0; c < 256; c++ {
		m.stay[c] = m.delta[m.class[c]] == 0
	}
	for i, t := range m.delta {
		m.delta[i] = t * int32(nc)
		if len(nodes[t].out) > 0 {
			m.delta[i] = ^m.delta[i]
		}
	}
	return m, nil
}

// states returns the number of DFA states.
func (m *acMatcher) states() int { return len(m.outStart) - 1 }

// scan runs the automaton over b and calls hit(pattern, end) for every
// occurrence (end is the index just past the match).
func (m *acMatcher) scan(b []byte, hit func(pattern int32, end int)) {
	delta, class := m.delta, &m.class
	row := int32(0)
	for i, c := range b {
		row = delta[row+int32(class[c])]
		if row < 0 {
			row = ^row
			for _, id := range m.output(row) {
				hit(id, i+1)
			}
		}
	}
}

// output returns the patterns ending in the state at row offset row.
func (m *acMatcher) output(row int32) []int32 {
	s := row / int32(m.nclass)
	return m.outs[m.outStart[s]:m.outStart[s+1]]
}
