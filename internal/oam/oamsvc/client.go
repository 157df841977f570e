package oamsvc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/segchain/segchain/internal/oam"
	pb "github.com/segchain/segchain/internal/oam/oampb"
)

// Client reaches the OAM service of nodes' agents: an oam.Remote.
type Client struct {
	conns map[string]pb.OAMClient
}

// NewClient uses the agents' connections (node → its agent's gRPC
// connection, client.Client.Conn: the same mutual-TLS channel).
func NewClient(conns map[string]grpc.ClientConnInterface) *Client {
	c := &Client{conns: map[string]pb.OAMClient{}}
	for n, cc := range conns {
		c.conns[n] = pb.NewOAMClient(cc)
	}
	return c
}

// Has implements oam.Remote.
func (c *Client) Has(node string) bool { _, ok := c.conns[node]; return ok }

func callErr(node, what string, err error) error {
	if status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("node %s: %s: its agent has no OAM service (an older build): %w", node, what, err)
	}
	return fmt.Errorf("node %s: %s: %w", node, what, err)
}

// Inject implements oam.Remote.
func (c *Client) Inject(ctx context.Context, node, iface string, packet []byte) error {
	cl, ok := c.conns[node]
	if !ok {
		return fmt.Errorf("node %s has no agent", node)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cl.Inject(ctx, &pb.InjectRequest{Iface: iface, Packet: packet}); err != nil {
		return callErr(node, "inject", err)
	}
	return nil
}

// Stats implements oam.Remote: every node at once.
func (c *Client) Stats(ctx context.Context, nodes []string) (map[string]map[string]uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out := map[string]map[string]uint64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	for _, n := range nodes {
		cl, ok := c.conns[n]
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := cl.Stats(ctx, &pb.StatsRequest{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, callErr(n, "IP statistics", err))
				return
			}
			out[n] = r.GetCounters()
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// Tap implements oam.Remote: one stream per node, each ready before it
// returns.
func (c *Client) Tap(ctx context.Context, nodes []string, magic uint64, max time.Duration, tl *oam.Timeline) (oam.Tapper, error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t := &remoteTap{magic: magic, cancel: cancel, grace: flushGrace, ch: make(chan oam.Event, 1024),
		done: make(chan struct{}), ended: make(chan struct{})}
	type ready struct {
		node string
		err  error
	}
	readyc := make(chan ready, len(nodes))
	for _, n := range nodes {
		cl, ok := c.conns[n]
		if !ok {
			t.Close()
			return nil, fmt.Errorf("node %s has no agent", n)
		}
		nctx, ncancel := context.WithCancel(sctx)
		st, err := cl.Tap(nctx, &pb.TapRequest{Magic: magic, MaxMs: uint32(max.Milliseconds())})
		if err != nil {
			ncancel()
			t.Close()
			return nil, callErr(n, "tap", err)
		}
		t.streams = append(t.streams, tapStream{node: n, cl: cl, cancel: ncancel})
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			first, err := st.Recv()
			if err == nil && !first.GetReady() {
				err = errors.New("the stream did not start with ready")
			}
			if err != nil {
				readyc <- ready{n, callErr(n, "tap", err)}
				return
			}
			off := tl.Offset(first.GetBootId(), time.Duration(first.GetClockOffsetNs()))
			readyc <- ready{n, nil}
			for {
				ev, err := st.Recv()
				if err != nil {
					// The end after a flush, or the stream cancelled
					// (Close, an agent without Flush): not an error.
					if !(errors.Is(err, io.EOF) && t.flushing.Load()) && nctx.Err() == nil {
						t.setErr(callErr(n, "tap", err))
					}
					return
				}
				e := oam.Event{At: time.Duration(ev.GetAtNs()) + off, Point: oam.Point{Node: n, Iface: ev.GetIface(), Ingress: true},
					Seq: ev.GetSeq(), SRH: ev.GetSrh(), SL: uint8(ev.GetSl()), Encap: ev.GetEncap(), Len: ev.GetLen(), Drop: ev.GetDrop()}
				if da := ev.GetDa(); len(da) == 4 || len(da) == 16 {
					e.DA = net.IP(da)
				}
				select {
				case t.ch <- e:
				case <-t.done:
					return
				}
			}
		}()
	}
	go func() { t.wg.Wait(); close(t.ended) }()
	var errs []error
	for range nodes {
		select {
		case r := <-readyc:
			if r.err != nil {
				errs = append(errs, r.err)
			}
		case <-ctx.Done():
			errs = append(errs, ctx.Err())
		}
		if len(errs) > 0 {
			break
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// flushGrace is how long the stream of an agent without Flush (an older
// build) is read after the trace's flush: what it has not sent by then
// is lost, as before Flush.
const flushGrace = 100 * time.Millisecond

// flushRPC bounds a Flush call.
const flushRPC = 5 * time.Second

type tapStream struct {
	node   string
	cl     pb.OAMClient
	cancel context.CancelFunc
}

// remoteTap merges the agents' streams.
type remoteTap struct {
	magic    uint64
	streams  []tapStream
	cancel   context.CancelFunc
	grace    time.Duration
	ch       chan oam.Event
	done     chan struct{} // Close
	ended    chan struct{} // every stream has ended
	flushing atomic.Bool
	flush    sync.Once
	once     sync.Once
	wg       sync.WaitGroup
	mu       sync.Mutex
	err      error
}

func (t *remoteTap) setErr(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = err
	}
}

// Collect implements oam.Tapper. It returns when every stream has ended
// (Flush; the agents end them at the trace's time bound anyway) or on
// Close; deadline is the flusher's (oam's multiTap). A stream that broke
// (an agent gone) is an error; the sightings read so far are returned
// with it.
func (t *remoteTap) Collect(_ time.Time, done func([]oam.Event) bool) ([]oam.Event, error) {
	var out []oam.Event
	for {
		select {
		case e := <-t.ch:
			out = append(out, e)
			if done != nil && done(out) {
				return out, nil
			}
		case <-t.ended:
			for {
				select {
				case e := <-t.ch:
					out = append(out, e)
					continue
				default:
				}
				break
			}
			t.mu.Lock()
			defer t.mu.Unlock()
			return out, t.err
		case <-t.done:
			return out, nil
		}
	}
}

// Flush implements oam.Flusher: every agent sends what its tap's ring
// buffer holds and ends its stream (the Flush RPC); an agent without it
// is read for flushGrace more.
func (t *remoteTap) Flush() {
	t.flush.Do(func() {
		t.flushing.Store(true)
		for _, s := range t.streams {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), flushRPC)
				defer cancel()
				_, err := s.cl.Flush(ctx, &pb.FlushRequest{Magic: t.magic})
				switch {
				case err == nil:
					return // the agent ends the stream after its last sighting
				case status.Code(err) != codes.Unimplemented:
					t.setErr(callErr(s.node, "flush", err))
				default:
					select {
					case <-time.After(t.grace):
					case <-t.done:
					}
				}
				s.cancel()
			}()
		}
	})
}

// Close implements oam.Tapper: the streams end, and with them the taps.
func (t *remoteTap) Close() error {
	t.once.Do(func() {
		t.cancel()
		close(t.done)
	})
	t.wg.Wait()
	return nil
}

// sampleEndGrace is how long the segment nodes' runs go on after the
// headend's marking ended (which itself waited 100 ms for its last marked
// packets): the packets still between hops.
const sampleEndGrace = 300 * time.Millisecond

// newRunID names a sampling run for EndSample.
func newRunID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Sample implements oam.Remote: the other nodes' runs start first, the
// headend's marking once they all see, and the others' runs end once the
// headend's has (EndSample): a headend that started late, on a loaded
// machine, no longer marks after the segments stopped seeing (a run under
// load reported 29 of 122 marked packets incomplete so). An agent that
// predates EndSample runs a second longer than the headend's duration.
func (c *Client) Sample(ctx context.Context, nodes []string, head string, key oam.ChainKey, rate uint32, dur time.Duration, started func(), tl *oam.Timeline) ([]oam.SampleEvent, oam.SampleCounts, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		evs    []oam.SampleEvent
		counts oam.SampleCounts
		err    error
	}
	runID := newRunID()
	results := make(chan result, len(nodes))
	var endMu sync.Mutex
	endable := map[string]context.CancelFunc{} // the other nodes whose runs wait for EndSample
	run := func(n string, rate uint32, d time.Duration, name string, ready chan<- error, results chan<- result) {
		cl, ok := c.conns[n]
		if !ok {
			ready <- fmt.Errorf("node %s has no agent", n)
			return
		}
		nctx, ncancel := context.WithCancel(sctx)
		defer ncancel()
		st, err := cl.Sample(nctx, &pb.SampleRequest{FirstSid: key.First[:], LastSid: key.Last[:], Rate: rate, DurationMs: uint32(d.Milliseconds()), Run: name})
		if err == nil {
			var first *pb.SampleEvent
			if first, err = st.Recv(); err == nil && !first.GetReady() {
				err = errors.New("the stream did not start with ready")
			}
			if err == nil {
				if first.GetEndable() {
					endMu.Lock()
					endable[n] = ncancel
					endMu.Unlock()
				}
				ready <- nil
				off := tl.Offset(first.GetBootId(), time.Duration(first.GetClockOffsetNs()))
				var r result
				for {
					ev, err := st.Recv()
					if err != nil {
						r.err = callErr(n, "sample", err)
						break
					}
					if ev.GetDone() {
						r.counts = oam.SampleCounts{Seen: ev.GetSeen(), Marked: ev.GetMarked(), HMAC: ev.GetHmac()}
						break
					}
					e := oam.SampleEvent{At: time.Duration(ev.GetAtNs()) + off, Node: n, Kind: uint8(ev.GetKind()), SL: uint8(ev.GetSl())}
					copy(e.DA[:], ev.GetDa())
					copy(e.ID[:], ev.GetId())
					r.evs = append(r.evs, e)
				}
				results <- r
				return
			}
		}
		ready <- callErr(n, "sample", err)
	}
	wait := func(ready chan error, k int) error {
		var errs []error
		for i := 0; i < k; i++ {
			errs = append(errs, <-ready)
		}
		return errors.Join(errs...)
	}
	ready := make(chan error, len(nodes))
	others := 0
	for _, n := range nodes {
		if n != head {
			others++
			go run(n, 0, dur+time.Second, runID, ready, results)
		}
	}
	if err := wait(ready, others); err != nil {
		return nil, oam.SampleCounts{}, err
	}
	hready, hresult := make(chan error, 1), make(chan result, 1)
	go run(head, rate, dur, "", hready, hresult)
	if err := wait(hready, 1); err != nil {
		return nil, oam.SampleCounts{}, err
	}
	if started != nil {
		started()
	}
	hr := <-hresult
	select {
	case <-time.After(sampleEndGrace):
	case <-ctx.Done():
	}
	endMu.Lock()
	for n, ncancel := range endable {
		// A run not ended so would go on to MaxSample: its stream is
		// ended instead, and the node's result is that error.
		if _, err := c.conns[n].EndSample(ctx, &pb.EndSampleRequest{Run: runID}); err != nil {
			ncancel()
		}
	}
	endMu.Unlock()
	evs, counts := hr.evs, hr.counts
	errs := []error{hr.err}
	for i := 0; i < others; i++ {
		r := <-results
		evs = append(evs, r.evs...)
		counts.Seen += r.counts.Seen
		counts.Marked += r.counts.Marked
		counts.HMAC += r.counts.HMAC
		errs = append(errs, r.err)
	}
	return evs, counts, errors.Join(errs...)
}
