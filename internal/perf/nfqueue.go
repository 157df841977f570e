package perf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// An accept-all NFQUEUE reader speaking nfnetlink directly (no library):
// one OS thread, blocking syscalls, one verdict per packet — the smallest
// userspace "service" Linux offers, the baseline of the userspace SR
// services. Being a thread of this process (not a child process), it
// cannot outlive the run; the recipe's cleanup stops it, and its CPU time
// is counted as the SUT's (Env.AddSUTTask).
//
// Why not a library (github.com/florianl/go-nfqueue is the maintained
// one): it reads through mdlayher/netlink on whatever goroutines and OS
// threads the runtime picks and hands each packet to a callback. The
// benchmark needs the opposite: one OS thread, locked, whose TID is pinned
// to the SUT's CPU and whose CPU time is the service's cost. With the
// library neither the pinning nor the accounting holds, and the baseline
// figures would change; the protocol part here is ~100 lines.

// nfnetlink queue constants (linux/netfilter/nfnetlink_queue.h).
const (
	nfnlSubsysQueue      = 3
	nfqnlMsgPacket       = 0
	nfqnlMsgVerdict      = 1
	nfqnlMsgConfig       = 2
	nfqaPacketHdr        = 1
	nfqaVerdictHdr       = 2
	nfqaCfgCmd           = 1
	nfqaCfgParams        = 2
	nfqaCfgQueueMaxlen   = 3
	nfqnlCfgCmdBind      = 1
	nfqnlCopyPacket      = 2
	nfAccept             = 1
	nfqMaxLen            = 1024 // packets queued in the kernel; beyond, dropped (no fail-open)
	nfqCopyRange         = 0xffff
	nfqRecvTimeout       = 200 * time.Millisecond // how soon the reader notices stop
	nfqSocketBufferBytes = 4 << 20
)

// nfqReader accepts every packet of one queue.
type nfqReader struct {
	queue    uint16
	fd       int
	tid      int
	stop     atomic.Bool
	done     chan error
	accepted atomic.Uint64
	once     sync.Once
}

// startNFQReader opens an nfnetlink socket in the SUT's namespace, binds
// queue, and starts the reader thread, pinned to the SUT's CPU (and
// SCHED_FIFO, priority 1, if realtime).
func startNFQReader(env *Env, queue uint16, realtime bool) (*nfqReader, error) {
	if env.Do == nil || env.AddSUTTask == nil || env.Cleanup == nil {
		return nil, fmt.Errorf("%w: the NFQUEUE reader needs a local SUT", ErrNotSupported)
	}
	r := &nfqReader{queue: queue, fd: -1, done: make(chan error, 1)}
	// The socket belongs to the namespace it was created in; the thread
	// that reads it may live anywhere.
	err := env.Do(func() error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		if err != nil {
			return fmt.Errorf("nfnetlink socket: %w", err)
		}
		r.fd = fd
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := r.configure(); err != nil {
		unix.Close(r.fd)
		return nil, err
	}
	tid := make(chan int, 1)
	go r.run(tid)
	r.tid = <-tid
	if err := env.AddSUTTask(r.tid); err != nil {
		r.Close()
		return nil, err
	}
	if realtime {
		if err := unix.SchedSetAttr(r.tid, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}, 0); err != nil {
			r.Close()
			return nil, fmt.Errorf("nfqueue reader SCHED_FIFO: %w", err)
		}
	}
	return r, nil
}

func (r *nfqReader) configure() error {
	_ = unix.SetsockoptInt(r.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, nfqSocketBufferBytes)
	// Overflowing the socket is the kernel dropping packets for a slow
	// reader: counted by the measurement, not an error to stop for.
	_ = unix.SetsockoptInt(r.fd, unix.SOL_NETLINK, unix.NETLINK_NO_ENOBUFS, 1)
	tv := unix.NsecToTimeval(nfqRecvTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(r.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("nfqueue: receive timeout: %w", err)
	}
	if err := unix.Bind(r.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("nfqueue: bind: %w", err)
	}
	cmd := []byte{nfqnlCfgCmdBind, 0, 0, 0}
	binary.BigEndian.PutUint16(cmd[2:], unix.AF_INET6)
	params := make([]byte, 5)
	binary.BigEndian.PutUint32(params, nfqCopyRange)
	params[4] = nfqnlCopyPacket
	maxlen := binary.BigEndian.AppendUint32(nil, nfqMaxLen)
	for i, a := range []struct {
		typ  uint16
		data []byte
	}{{nfqaCfgCmd, cmd}, {nfqaCfgParams, params}, {nfqaCfgQueueMaxlen, maxlen}} {
		msg := nfqMessage(nfqnlMsgConfig, unix.NLM_F_REQUEST|unix.NLM_F_ACK, uint32(i+1), r.queue, nlAttr(a.typ, a.data))
		if err := unix.Sendto(r.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return fmt.Errorf("nfqueue %d: config: %w", r.queue, err)
		}
		if err := r.ack(uint32(i + 1)); err != nil {
			return fmt.Errorf("nfqueue %d: config attribute %d: %w", r.queue, a.typ, err)
		}
	}
	return nil
}

// ack reads the kernel's answer to config message seq.
func (r *nfqReader) ack(seq uint32) error {
	buf := make([]byte, 8192)
	for try := 0; try < 10; try++ {
		n, _, err := unix.Recvfrom(r.fd, buf, 0)
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Type != unix.NLMSG_ERROR || m.Header.Seq != seq || len(m.Data) < 4 {
				continue
			}
			if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
				if unix.Errno(-e) == unix.EBUSY {
					return fmt.Errorf("queue already bound by another reader: %w", unix.Errno(-e))
				}
				return unix.Errno(-e)
			}
			return nil
		}
	}
	return errors.New("no acknowledgement")
}

// loop receives queued packets and accepts each with its own verdict
// message, as a minimal userspace service does, until stopped.
func (r *nfqReader) loop() error {
	buf := make([]byte, 1<<16)
	verdict := make([]byte, 8)
	binary.BigEndian.PutUint32(verdict, nfAccept)
	to := &unix.SockaddrNetlink{Family: unix.AF_NETLINK}
	for !r.stop.Load() {
		n, _, err := unix.Recvfrom(r.fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENOBUFS) {
				continue
			}
			return fmt.Errorf("nfqueue %d: receive: %w", r.queue, err)
		}
		for b := buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			l := int(binary.NativeEndian.Uint32(b))
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				break
			}
			typ := binary.NativeEndian.Uint16(b[4:])
			if typ == nfnlSubsysQueue<<8|nfqnlMsgPacket {
				if id, ok := nfqPacketID(b[unix.NLMSG_HDRLEN:l]); ok {
					binary.BigEndian.PutUint32(verdict[4:], id)
					msg := nfqMessage(nfqnlMsgVerdict, unix.NLM_F_REQUEST, 0, r.queue, nlAttr(nfqaVerdictHdr, verdict))
					if err := unix.Sendto(r.fd, msg, 0, to); err != nil && !errors.Is(err, unix.ENOBUFS) {
						return fmt.Errorf("nfqueue %d: verdict: %w", r.queue, err)
					}
					r.accepted.Add(1)
				}
			}
			b = b[min(nlAlign(l), len(b)):]
		}
	}
	return nil
}

// run is the reader thread: it reports its thread id on tid, then reads
// until stopped. The goroutine stays locked to its OS thread and exits
// locked, so the runtime terminates the thread with it — except the main
// thread, which the runtime parks instead of terminating (it would outlive
// the reader, still counted as a SUT task): a goroutine that lands on the
// main thread hands the work to a new goroutine, which cannot get the main
// thread while this one holds it locked.
func (r *nfqReader) run(tid chan<- int) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		started := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(started)
			tid <- unix.Gettid()
			r.done <- r.loop()
		}()
		<-started
		runtime.UnlockOSThread()
		return
	}
	tid <- unix.Gettid()
	r.done <- r.loop()
}

// nfqStopBound bounds how long Close waits for the reader thread to stop
// and to be gone (it notices stop within nfqRecvTimeout when scheduled; a
// loaded machine may take much longer). Exceeding it is an error, not a
// thread silently left behind.
const nfqStopBound = 30 * time.Second

// Close stops the reader, waits until its thread has exited, and closes
// its socket, which unbinds the queue: its packets are dropped from then
// on. The loop returning is not enough: the runtime terminates the locked
// thread only after the goroutine has gone, so Close waits for the thread
// to leave /proc/self/task.
func (r *nfqReader) Close() error {
	var err error
	r.once.Do(func() {
		r.stop.Store(true)
		deadline := time.Now().Add(nfqStopBound)
		select {
		case err = <-r.done:
			if gerr := waitThreadGone(r.tid, deadline); err == nil {
				err = gerr
			}
		case <-time.After(nfqStopBound):
			err = fmt.Errorf("nfqueue %d: reader did not stop within %v", r.queue, nfqStopBound)
		}
		if cerr := unix.Close(r.fd); err == nil {
			err = cerr
		}
	})
	return err
}

// waitThreadGone waits until thread tid of this process has exited.
func waitThreadGone(tid int, deadline time.Time) error {
	task := fmt.Sprintf("/proc/self/task/%d", tid)
	for {
		if _, err := os.Stat(task); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nfqueue reader thread %d still running", tid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// nfqPacketID returns the packet ID of an NFQNL_MSG_PACKET payload
// (nfgenmsg, then attributes).
func nfqPacketID(p []byte) (uint32, bool) {
	if len(p) < 4 {
		return 0, false
	}
	for a := p[4:]; len(a) >= 4; {
		l := int(binary.NativeEndian.Uint16(a))
		typ := binary.NativeEndian.Uint16(a[2:]) & 0x3fff // minus NLA_F_NESTED/NET_BYTEORDER
		if l < 4 || l > len(a) {
			return 0, false
		}
		if typ == nfqaPacketHdr && l >= 8 {
			return binary.BigEndian.Uint32(a[4:]), true
		}
		a = a[min(nlAlign(l), len(a)):]
	}
	return 0, false
}

func nlAlign(n int) int { return (n + 3) &^ 3 }

// nlAttr encodes one netlink attribute, padded.
func nlAttr(typ uint16, data []byte) []byte {
	b := make([]byte, 4, nlAlign(4+len(data)))
	binary.NativeEndian.PutUint16(b, uint16(4+len(data)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// nfqMessage encodes an nfnetlink queue message: netlink header, nfgenmsg
// (AF_UNSPEC, version 0, the queue number), attributes.
func nfqMessage(msg uint16, flags uint16, seq uint32, queue uint16, attrs ...[]byte) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN+4)
	binary.NativeEndian.PutUint16(b[4:], nfnlSubsysQueue<<8|msg)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], seq)
	b[unix.NLMSG_HDRLEN] = unix.AF_UNSPEC
	binary.BigEndian.PutUint16(b[unix.NLMSG_HDRLEN+2:], queue)
	for _, a := range attrs {
		b = append(b, a...)
	}
	binary.NativeEndian.PutUint32(b, uint32(len(b)))
	return b
}
