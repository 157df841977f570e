package boundary

import (
	"fmt"
	"path/filepath"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nodestate"
)

// Reader observes one namespace's boundary filter again and again (an
// agent's every ObserveDigest: a no-op apply asks each node once), keeping
// the pinned maps it reads open between observations instead of opening
// them per request: BPF_OBJ_GET and each map's info read from /proc
// (fdinfo) were ~14 % of an agent's no-op CPU at 1,000 nodes
// (docs/scale.md, "Session 17").
//
// A kept map is only used while its pin is the one it was opened from:
// before each observation every kept pin is stat'ed, and a pin that is
// gone, or is another inode than at the open (another map pinned there:
// destroy then apply, an upgrade that re-creates a map laid out
// otherwise, anyone's bpftool), makes the Reader close every kept map and
// open them afresh, as an observation without it does. A pin's identity is
// its device, inode number and change time (to the nanosecond): bpffs
// gives a new pin a new inode, whose number could only repeat after 2³²
// inodes made on the host, and then not within the same nanosecond. The
// pins are stat'ed before the maps are opened: a map replaced in between
// is opened with the older pin's identity kept, which the next
// observation finds differing (one more open, never a stale map).
//
// The entries are read from the kept maps on every observation (they
// change in place); the links and the trusted list as Observe reads them.
// Not safe for concurrent use: the agent observes a node one request at a
// time (local.Local.ObserveCached).
type Reader struct {
	netns  string
	n      *node      // the kept maps, nil when none
	ids    [4]pinID   // their pins' identities when opened (readPins order)
	sample ebpf.MapID // bnd_sample's ID (the sampling program's check)
	opens  uint64
}

// readPins are the maps an observation reads (bnd_sample for its ID
// only), in Reader.ids' order.
var readPins = [4]string{"bnd_lpm", "bnd_hmac_sids", "bnd_hmac_keys", "bnd_sample"}

// pinID is what tells one pinned object's inode from another's.
type pinID struct {
	dev, ino uint64
	ctime    unix.Timespec
}

func statPin(p string) (pinID, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return pinID{}, err
	}
	return pinID{dev: st.Dev, ino: st.Ino, ctime: st.Ctim}, nil
}

// NewReader returns a Reader of netns's boundary filter; nothing is opened
// before its first observation.
func NewReader(netns string) *Reader { return &Reader{netns: netns} }

// Observe is ObserveWith through the kept maps.
func (r *Reader) Observe(known Interfaces) (*nodestate.Boundary, error) {
	name, dir, err := loader.Dir(r.netns, false, nil)
	if err != nil {
		return nil, err
	}
	if r.n != nil && (r.n.dir != dir || !r.same()) {
		r.Close()
	}
	if r.n == nil {
		var ids [4]pinID
		for i, m := range readPins {
			if ids[i], err = statPin(filepath.Join(dir, m)); err != nil {
				// Nothing installed (no bnd_lpm), or a map missing:
				// as Observe, which says what is wrong.
				return ObserveWith(r.netns, known)
			}
		}
		n := &node{netns: r.netns, name: name, dir: dir}
		if err := loader.OpenPinned(&n.objs.boundaryTCMaps, dir); err != nil {
			return ObserveWith(r.netns, known) // any doubt: as Observe
		}
		// Only what an observation reads is kept open.
		kept := boundaryTCMaps{BndLpm: n.objs.BndLpm, BndHmacSids: n.objs.BndHmacSids,
			BndHmacKeys: n.objs.BndHmacKeys, BndSample: n.objs.BndSample}
		for _, m := range []*ebpf.Map{n.objs.BndCounters, n.objs.BndSampleCtrs, n.objs.BndSampleEvents} {
			m.Close()
		}
		n.objs.boundaryTCMaps = kept
		r.n, r.ids, r.sample = n, ids, sampleMapID(n)
		r.opens++
	}
	b, err := observe(r.n, r.sample, known)
	if err != nil {
		// A read that failed on a kept map: open afresh next time.
		r.Close()
		return nil, fmt.Errorf("boundary: %w", err)
	}
	return b, nil
}

// same: every kept map's pin is still the one it was opened from.
func (r *Reader) same() bool {
	for i, m := range readPins {
		id, err := statPin(filepath.Join(r.n.dir, m))
		if err != nil || id != r.ids[i] {
			return false
		}
	}
	return true
}

// Close closes the kept maps (the next observation opens them again).
func (r *Reader) Close() {
	if r.n != nil {
		r.n.close()
		r.n = nil
	}
}

// Opens is how many times the maps were opened (tests).
func (r *Reader) Opens() uint64 { return r.opens }
