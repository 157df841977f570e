// Package crypt is the shared half of the encrypt/decrypt example
// services: an SR-aware pair that seals the inner packet with AES-256-GCM
// at one SID of a chain and opens it at a later one, so the segments in
// between (and the links) carry ciphertext only. Public API only
// (pkg/srv6svc).
//
// Wire format, after the SRH (whose Next Header becomes 253, the RFC 3692
// experimental protocol, while the packet is sealed):
//
//	 0       1       2       3
//	+-------+-------+-------+-------+
//	|  ver  | proto |    key id     |   ver 1; proto: the inner packet's
//	+-------+-------+-------+-------+   protocol (4 IPv4, 41 IPv6) and the
//	|       sequence number         |   SRH Next Header restored on open
//	|          (64 bits)            |
//	+-------------------------------+
//	|  AES-256-GCM ciphertext of    |   nonce: 4 zero bytes + the sequence
//	|  the inner packet, then the   |   number; additional data: the 12
//	|  16-byte tag                  |   header bytes and the outer source
//	+-------------------------------+
//
// Keys: a directory of files <id>.key (id 1..65535), each 32 bytes as 64
// hex digits. The encryptor seals with the highest id; the decryptor opens
// with any id present. Rotation: add the next id's file on both sides
// (decryptor first), reload (SIGHUP), remove the old one later. The
// sequence number starts at the encryptor's start time in nanoseconds and
// grows by one per packet, so a restart never reuses a nonce (one
// encrypting process per key). The decryptor keeps a replay window per key
// (the last 1024 sequence numbers): a duplicate, or one older than the
// window, is dropped. Every failure is dropped and counted by reason.
package crypt

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segchain/segchain/pkg/srv6svc"
)

// Wire constants.
const (
	Version   = 1
	SealedNH  = 253 // RFC 3692 experimental protocol: the SRH's Next Header while sealed
	HeaderLen = 12
	TagLen    = 16
	Window    = 1024 // replay window, in sequence numbers
)

// Keys is a key ring loaded from a directory.
type Keys struct {
	mu      sync.RWMutex
	dir     string
	aeads   map[uint16]cipher.AEAD
	current uint16
}

// LoadKeys reads dir's <id>.key files.
func LoadKeys(dir string) (*Keys, error) {
	k := &Keys{dir: dir}
	return k, k.Reload()
}

// Reload re-reads the directory (rotation); on error the old ring stays.
func (k *Keys) Reload() error {
	files, err := filepath.Glob(filepath.Join(k.dir, "*.key"))
	if err != nil {
		return err
	}
	ring := map[uint16]cipher.AEAD{}
	var errs []error
	for _, f := range files {
		id, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(f), ".key"), 10, 16)
		if err != nil || id == 0 {
			errs = append(errs, fmt.Errorf("%s: name must be <id>.key, id 1..65535", f))
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		key, err := hex.DecodeString(strings.TrimSpace(string(raw)))
		if err != nil || len(key) != 32 {
			errs = append(errs, fmt.Errorf("%s: want 32 bytes as 64 hex digits", f))
			continue
		}
		blk, _ := aes.NewCipher(key)
		a, _ := cipher.NewGCM(blk)
		ring[uint16(id)] = a
	}
	if len(ring) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("%s: no <id>.key file", k.dir))
	}
	if len(errs) > 0 {
		return fmt.Errorf("keys: %w", errors.Join(errs...))
	}
	ids := make([]int, 0, len(ring))
	for id := range ring {
		ids = append(ids, int(id))
	}
	sort.Ints(ids)
	k.mu.Lock()
	k.aeads, k.current = ring, uint16(ids[len(ids)-1])
	k.mu.Unlock()
	return nil
}

func (k *Keys) get(id uint16) cipher.AEAD {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.aeads[id]
}

func (k *Keys) sealing() (uint16, cipher.AEAD) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.current, k.aeads[k.current]
}

// Counters of a sealer or opener; every drop has its reason.
type Counters struct {
	Sealed, Opened                                     atomic.Uint64
	DropNotIP, DropTooLong                             atomic.Uint64 // encrypt
	DropNotSealed, DropBadHeader, DropUnknownKey       atomic.Uint64 // decrypt
	DropAuth, DropReplay, DropTooOld, DropBadPlaintext atomic.Uint64
}

// String lists the counters.
func (c *Counters) String() string {
	return fmt.Sprintf("sealed %d opened %d drop: not-ip %d too-long %d not-sealed %d bad-header %d unknown-key %d auth %d replay %d too-old %d bad-plaintext %d",
		c.Sealed.Load(), c.Opened.Load(), c.DropNotIP.Load(), c.DropTooLong.Load(), c.DropNotSealed.Load(), c.DropBadHeader.Load(),
		c.DropUnknownKey.Load(), c.DropAuth.Load(), c.DropReplay.Load(), c.DropTooOld.Load(), c.DropBadPlaintext.Load())
}

// Sealer encrypts inner packets.
type Sealer struct {
	Keys *Keys
	C    Counters
	seq  atomic.Uint64
	pool sync.Pool
}

// NewSealer starts the sequence at the current time in nanoseconds.
func NewSealer(k *Keys) *Sealer {
	s := &Sealer{Keys: k}
	s.seq.Store(uint64(time.Now().UnixNano()))
	s.pool.New = func() any { b := make([]byte, 0, 4096); return &b }
	return s
}

func nonce(seq uint64) []byte {
	n := make([]byte, 12)
	binary.BigEndian.PutUint64(n[4:], seq)
	return n
}

func ad(hdr []byte, p *srv6svc.Packet) []byte {
	src := p.Outer().Src.As16()
	return append(append(make([]byte, 0, HeaderLen+16), hdr...), src[:]...)
}

// Handle seals the inner packet (an srv6svc.Handler).
func (s *Sealer) Handle(p *srv6svc.Packet) srv6svc.Verdict {
	proto := p.InnerProto()
	if proto != 4 && proto != 41 {
		s.C.DropNotIP.Add(1)
		return srv6svc.Drop
	}
	id, a := s.Keys.sealing()
	seq := s.seq.Add(1)
	bp := s.pool.Get().(*[]byte)
	defer s.pool.Put(bp)
	out := (*bp)[:HeaderLen]
	out[0], out[1] = Version, proto
	binary.BigEndian.PutUint16(out[2:], id)
	binary.BigEndian.PutUint64(out[4:], seq)
	out = a.Seal(out, nonce(seq), p.Inner(), ad(out[:HeaderLen], p))
	*bp = out
	if err := p.SetPayload(SealedNH, out); err != nil {
		s.C.DropTooLong.Add(1)
		return srv6svc.Drop
	}
	s.C.Sealed.Add(1)
	return srv6svc.Forward
}

// window is one key's replay window (RFC 4303 §3.4.3 style bitmap).
type window struct {
	top  uint64
	bits [Window / 64]uint64
}

// check accepts seq once; it reports a replay or a too old number.
func (w *window) check(seq uint64) (replay, old bool) {
	switch {
	case w.top == 0 || seq > w.top:
		shift := seq - w.top
		if w.top == 0 || shift >= Window {
			w.bits = [Window / 64]uint64{}
		} else {
			for i := w.top + 1; i <= seq; i++ {
				w.bits[(i%Window)/64] &^= 1 << (i % 64)
			}
		}
		w.top = seq
	case w.top-seq >= Window:
		return false, true
	case w.bits[(seq%Window)/64]&(1<<(seq%64)) != 0:
		return true, false
	}
	w.bits[(seq%Window)/64] |= 1 << (seq % 64)
	return false, false
}

// Opener decrypts sealed packets.
type Opener struct {
	Keys *Keys
	C    Counters
	mu   sync.Mutex
	win  map[uint16]*window
	pool sync.Pool
}

// NewOpener returns an opener over k.
func NewOpener(k *Keys) *Opener {
	o := &Opener{Keys: k, win: map[uint16]*window{}}
	o.pool.New = func() any { b := make([]byte, 0, 4096); return &b }
	return o
}

// Handle opens a sealed packet (an srv6svc.Handler).
func (o *Opener) Handle(p *srv6svc.Packet) srv6svc.Verdict {
	if p.InnerProto() != SealedNH {
		o.C.DropNotSealed.Add(1)
		return srv6svc.Drop
	}
	in := p.Inner()
	if len(in) < HeaderLen+TagLen || in[0] != Version || (in[1] != 4 && in[1] != 41) {
		o.C.DropBadHeader.Add(1)
		return srv6svc.Drop
	}
	id, seq := binary.BigEndian.Uint16(in[2:]), binary.BigEndian.Uint64(in[4:])
	a := o.Keys.get(id)
	if a == nil {
		o.C.DropUnknownKey.Add(1)
		return srv6svc.Drop
	}
	bp := o.pool.Get().(*[]byte)
	defer o.pool.Put(bp)
	plain, err := a.Open((*bp)[:0], nonce(seq), in[HeaderLen:], ad(in[:HeaderLen], p))
	if err != nil {
		o.C.DropAuth.Add(1)
		return srv6svc.Drop
	}
	*bp = plain
	// The window moves only for authentic packets: a forged sequence
	// number cannot push it forward.
	o.mu.Lock()
	w := o.win[id]
	if w == nil {
		w = &window{}
		o.win[id] = w
	}
	replay, old := w.check(seq)
	o.mu.Unlock()
	switch {
	case replay:
		o.C.DropReplay.Add(1)
		return srv6svc.Drop
	case old:
		o.C.DropTooOld.Add(1)
		return srv6svc.Drop
	}
	if len(plain) < 1 || (in[1] == 4) != (plain[0]>>4 == 4) {
		o.C.DropBadPlaintext.Add(1)
		return srv6svc.Drop
	}
	if err := p.SetPayload(in[1], plain); err != nil {
		o.C.DropBadPlaintext.Add(1)
		return srv6svc.Drop
	}
	o.C.Opened.Add(1)
	return srv6svc.Forward
}
