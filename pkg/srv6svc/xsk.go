package srv6svc

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The AF_XDP plumbing: one socket and one UMEM per worker, bound to a
// queue of the binding's own veth: the XDP program there redirects the
// SIDs' frames to it, and the frames it sends leave on that veth, whose
// peer (the loop side) hands them to the node's stack, which routes them
// to their next segment. A received frame is processed in place and sent
// from the same UMEM chunk: no copy in userspace.

const (
	frameSize  = 4096 // one page per chunk: room for a longer inner packet
	numFrames  = 4096
	ringSize   = 2048 // rx, tx
	fqSize     = 4096 // fill, completion (every frame fits)
	descSize   = int(unsafe.Sizeof(unix.XDPDesc{}))
	xdpHeadOff = unix.XDP_PACKET_HEADROOM
)

// ring is one AF_XDP ring mapped from the kernel.
type ring struct {
	mem        []byte
	prod, cons *uint32
	flags      *uint32
	desc       unsafe.Pointer
	mask       uint32
	size       uint32
	cached     uint32 // producer rings: our producer; consumer rings: our consumer
}

func mapRing(fd int, off unix.XDPRingOffset, pgoff int64, entries uint32, entrySize int) (*ring, error) {
	n := int(off.Desc) + int(entries)*entrySize
	mem, err := unix.Mmap(fd, pgoff, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap ring: %w", err)
	}
	base := unsafe.Pointer(&mem[0])
	r := &ring{
		mem:   mem,
		prod:  (*uint32)(unsafe.Add(base, off.Producer)),
		cons:  (*uint32)(unsafe.Add(base, off.Consumer)),
		flags: (*uint32)(unsafe.Add(base, off.Flags)),
		desc:  unsafe.Add(base, off.Desc),
		mask:  entries - 1,
		size:  entries,
	}
	return r, nil
}

func (r *ring) unmap() {
	if r != nil && r.mem != nil {
		_ = unix.Munmap(r.mem)
		r.mem = nil
	}
}

// Producer side (fill, tx).
func (r *ring) free() uint32 { return r.size - (r.cached - atomic.LoadUint32(r.cons)) }
func (r *ring) addr(i uint32) *uint64 {
	return (*uint64)(unsafe.Add(r.desc, uintptr(i&r.mask)*8))
}
func (r *ring) xdesc(i uint32) *unix.XDPDesc {
	return (*unix.XDPDesc)(unsafe.Add(r.desc, uintptr(i&r.mask)*uintptr(descSize)))
}
func (r *ring) submit() { atomic.StoreUint32(r.prod, r.cached) }

// Consumer side (rx, completion): the entries [cached, prod).
func (r *ring) avail() uint32 { return atomic.LoadUint32(r.prod) - r.cached }
func (r *ring) release()      { atomic.StoreUint32(r.cons, r.cached) }

// xsk is one worker's UMEM and socket.
type xsk struct {
	umem       []byte
	fd         int
	fill, comp *ring
	rx, tx     *ring
	free       []uint64
	zerocopy   bool
}

func sockopt(fd, opt int, p unsafe.Pointer, n uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), n, 0)
	if e != 0 {
		return e
	}
	return nil
}

func mmapOffsets(fd int) (unix.XDPMmapOffsets, error) {
	var off unix.XDPMmapOffsets
	n := uint32(unsafe.Sizeof(off))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&n)), 0)
	if e != 0 {
		return off, fmt.Errorf("getsockopt XDP_MMAP_OFFSETS: %w", e)
	}
	return off, nil
}

// newXSK opens a worker's socket on (ifindex, queue). It must run in the
// interface's network namespace. ErrNotSupported wraps a kernel without
// AF_XDP.
func newXSK(ifindex, queue int) (x *xsk, err error) {
	x = &xsk{fd: -1}
	defer func() {
		if err != nil {
			x.close()
		}
	}()
	x.umem, err = unix.Mmap(-1, 0, frameSize*numFrames, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return x, fmt.Errorf("mmap umem: %w", err)
	}
	if x.fd, err = unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
		if errors.Is(err, unix.EAFNOSUPPORT) {
			return x, fmt.Errorf("AF_XDP socket: %w (%w)", err, ErrNotSupported)
		}
		return x, fmt.Errorf("AF_XDP socket: %w", err)
	}
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&x.umem[0]))), Len: uint64(len(x.umem)), Size: frameSize}
	if err = sockopt(x.fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return x, fmt.Errorf("register umem: %w", err)
	}
	if x.fill, x.comp, err = umemRings(x.fd); err != nil {
		return x, err
	}
	if err = unix.SetsockoptInt(x.fd, unix.SOL_XDP, unix.XDP_RX_RING, ringSize); err != nil {
		return x, fmt.Errorf("rx ring: %w", err)
	}
	if err = unix.SetsockoptInt(x.fd, unix.SOL_XDP, unix.XDP_TX_RING, ringSize); err != nil {
		return x, fmt.Errorf("tx ring: %w", err)
	}
	off, err := mmapOffsets(x.fd)
	if err != nil {
		return x, err
	}
	if x.rx, err = mapRing(x.fd, off.Rx, unix.XDP_PGOFF_RX_RING, ringSize, descSize); err != nil {
		return x, err
	}
	if x.tx, err = mapRing(x.fd, off.Tx, unix.XDP_PGOFF_TX_RING, ringSize, descSize); err != nil {
		return x, err
	}
	if err = unix.Bind(x.fd, &unix.SockaddrXDP{Ifindex: uint32(ifindex), QueueID: uint32(queue)}); err != nil {
		return x, fmt.Errorf("bind AF_XDP to ifindex %d queue %d: %w", ifindex, queue, err)
	}
	var opts uint32
	n := uint32(4)
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(x.fd), unix.SOL_XDP, unix.XDP_OPTIONS,
		uintptr(unsafe.Pointer(&opts)), uintptr(unsafe.Pointer(&n)), 0); e == 0 {
		x.zerocopy = opts&unix.XDP_OPTIONS_ZEROCOPY != 0
	}
	// Every frame starts in the fill ring: a processed frame is sent from
	// where it was received and comes back through the completion ring.
	x.free = make([]uint64, 0, numFrames)
	for i := 0; i < numFrames; i++ {
		x.free = append(x.free, uint64(i*frameSize))
	}
	x.refill()
	return x, nil
}

// umemRings sizes and maps the fill and completion rings of fd.
func umemRings(fd int) (fill, comp *ring, err error) {
	if err = unix.SetsockoptInt(fd, unix.SOL_XDP, unix.XDP_UMEM_FILL_RING, fqSize); err != nil {
		return nil, nil, fmt.Errorf("fill ring: %w", err)
	}
	if err = unix.SetsockoptInt(fd, unix.SOL_XDP, unix.XDP_UMEM_COMPLETION_RING, fqSize); err != nil {
		return nil, nil, fmt.Errorf("completion ring: %w", err)
	}
	off, err := mmapOffsets(fd)
	if err != nil {
		return nil, nil, err
	}
	if fill, err = mapRing(fd, off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, fqSize, 8); err != nil {
		return nil, nil, err
	}
	if comp, err = mapRing(fd, off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, fqSize, 8); err != nil {
		fill.unmap()
		return nil, nil, err
	}
	return fill, comp, nil
}

// refill moves free chunks to the fill ring.
func (x *xsk) refill() {
	n := min(x.fill.free(), uint32(len(x.free)))
	if n == 0 {
		return
	}
	for i := uint32(0); i < n; i++ {
		*x.fill.addr(x.fill.cached) = x.free[len(x.free)-1]
		x.free = x.free[:len(x.free)-1]
		x.fill.cached++
	}
	x.fill.submit()
}

// reclaim takes sent chunks back from the completion ring.
func (x *xsk) reclaim() {
	n := x.comp.avail()
	for i := uint32(0); i < n; i++ {
		a := *x.comp.addr(x.comp.cached)
		x.free = append(x.free, a&^uint64(frameSize-1))
		x.comp.cached++
	}
	if n > 0 {
		x.comp.release()
	}
}

// kick asks the kernel to send what the tx ring holds (copy mode always
// needs it). The kernel sends at most 32 frames per call in copy mode, so
// it is asked again while frames remain, a bounded number of times.
func (x *xsk) kick() error {
	for try := 0; try < 64; try++ {
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(x.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0, unix.EAGAIN, unix.EBUSY, unix.ENOBUFS, unix.EINTR:
		default:
			return fmt.Errorf("AF_XDP tx kick: %w", e)
		}
		if atomic.LoadUint32(x.tx.cons) == x.tx.cached {
			return nil
		}
		if e == unix.ENOBUFS || e == unix.EBUSY {
			return nil // the device is busy: frames stay queued for the next kick
		}
	}
	return nil
}

// frame returns the UMEM bytes of a descriptor and the chunk it lies in.
func (x *xsk) frame(addr uint64, n uint32) (buf []byte, chunk uint64) {
	chunk = addr &^ uint64(frameSize-1)
	return x.umem[addr : addr+uint64(n) : chunk+frameSize], chunk
}

func (x *xsk) stats() unix.XDPStatistics {
	var s unix.XDPStatistics
	n := uint32(unsafe.Sizeof(s))
	unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(x.fd), unix.SOL_XDP, unix.XDP_STATISTICS,
		uintptr(unsafe.Pointer(&s)), uintptr(unsafe.Pointer(&n)), 0)
	return s
}

func (x *xsk) close() {
	for _, r := range []*ring{x.fill, x.rx, x.comp, x.tx} {
		r.unmap()
	}
	if x.fd >= 0 {
		unix.Close(x.fd)
		x.fd = -1
	}
	if x.umem != nil {
		_ = unix.Munmap(x.umem)
		x.umem = nil
	}
}
