package perf

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/testutil"
)

// monoNow is CLOCK_MONOTONIC in ns, bpf_ktime_get_ns's clock.
func monoNow(t *testing.T) uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return uint64(ts.Nano())
}

// genStamped runs the generator program once (BPF_PROG_TEST_RUN, not live)
// with template slot active and stamping on, and returns the frame it
// produced and the clock before and after.
func genStamped(t *testing.T, g *xdpGenerator, slot int) (out []byte, before, after uint64) {
	t.Helper()
	if err := g.Select(slot); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, perfTmplMax+256)
	before = monoNow(t)
	ret, err := g.objs.PerfGen.Run(&ebpf.RunOptions{Data: make([]byte, len(g.frames[slot])), DataOut: buf})
	after = monoNow(t)
	if err != nil {
		t.Fatalf("generator test run (%d-byte template): %v", len(g.frames[slot]), err)
	}
	if ret != 4 { // XDP_REDIRECT
		t.Fatalf("generator returned %d, want XDP_REDIRECT", ret)
	}
	return buf[:len(g.frames[slot])], before, after
}

// TestGeneratorStampTestRun runs the real generator program over every
// native recipe's template with stamping on: the frame is the template
// but for its last 16 bytes, which hold the magic, the slot and a time
// taken during the run; tshark then checks every UDP checksum is still
// right (the compensation word).
func TestGeneratorStampTestRun(t *testing.T) {
	testutil.RequireRoot(t)
	g, err := newXDPGenerator("", 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.objs.Close()
	if err := g.SetStamp(true); err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistry(NativeRecipes()...)
	if err != nil {
		t.Fatal(err)
	}
	var frames, templates [][]byte
	slot, last := 2, 0
	for _, r := range reg.List() {
		tmpl, err := r.Setup(fakeEnv(), 1, Params{Size: 64})
		if err != nil {
			continue
		}
		if err := g.Load(slot, tmpl); err != nil {
			t.Fatal(err)
		}
		out, before, after := genStamped(t, g, slot)
		off := len(tmpl) - stampLen
		if !bytes.Equal(out[:off], tmpl[:off]) {
			t.Errorf("%s: the generator changed bytes before the stamp", r.Name())
		}
		if m := binary.LittleEndian.Uint32(out[off:]); m != stampMagic {
			t.Errorf("%s: magic %#x, want %#x", r.Name(), m, stampMagic)
		}
		if s := binary.LittleEndian.Uint16(out[off+4:]); int(s) != slot {
			t.Errorf("%s: slot %d, want %d", r.Name(), s, slot)
		}
		if ts := binary.LittleEndian.Uint64(out[off+8:]); ts < before || ts > after {
			t.Errorf("%s: stamp %d outside the run [%d, %d]", r.Name(), ts, before, after)
		}
		frames, templates = append(frames, out), append(templates, tmpl)
		last, slot = slot, slot%(perfTmplSlots-1)+1
	}
	// Stamping off: the template's own tail.
	if err := g.SetStamp(false); err != nil {
		t.Fatal(err)
	}
	out, _, _ := genStamped(t, g, last)
	if !bytes.Equal(out, g.frames[last]) {
		t.Errorf("stamping off: frame differs from the template")
	}
	if len(frames) < 10 {
		t.Fatalf("only %d recipes built a frame", len(frames))
	}
	testutil.RequireTool(t, "tshark")
	status := func(frames [][]byte) []string {
		path := filepath.Join(t.TempDir(), "frames.pcap")
		if err := os.WriteFile(path, pcapOf(frames), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := exec.Command("tshark", "-r", path, "-o", "udp.check_checksum:TRUE", "-T", "fields", "-e", "udp.checksum.status").Output()
		if err != nil {
			t.Fatalf("tshark: %v", err)
		}
		lines := strings.Split(strings.TrimRight(string(res), "\n"), "\n")
		if len(lines) != len(frames) {
			t.Fatalf("tshark printed %d lines for %d frames:\n%s", len(lines), len(frames), res)
		}
		return lines
	}
	// 1 = good; 3 = not present (the IPv4 templates send checksum 0).
	want, got := status(templates), status(frames)
	good := 0
	for i := range got {
		if got[i] != want[i] || (got[i] != "1" && got[i] != "3") {
			t.Errorf("frame %d: tshark udp.checksum.status %q, template %q: want 1 (good), or 3 (none) as the template", i, got[i], want[i])
		}
		if got[i] == "1" {
			good++
		}
	}
	if good < len(got)/2 {
		t.Errorf("only %d of %d stamped frames have a checked UDP checksum", good, len(got))
	}
}

// pcapOf writes frames as a pcap file (Ethernet).
func pcapOf(frames [][]byte) []byte {
	var b bytes.Buffer
	hdr := make([]byte, 24)
	binary.LittleEndian.PutUint32(hdr[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(hdr[4:], 2)
	binary.LittleEndian.PutUint16(hdr[6:], 4)
	binary.LittleEndian.PutUint32(hdr[16:], 65535)
	binary.LittleEndian.PutUint32(hdr[20:], 1)
	b.Write(hdr)
	for _, f := range frames {
		rec := make([]byte, 16)
		binary.LittleEndian.PutUint32(rec[8:], uint32(len(f)))
		binary.LittleEndian.PutUint32(rec[12:], uint32(len(f)))
		b.Write(rec)
		b.Write(f)
	}
	return b.Bytes()
}

// sinkUnderTest is one sink program with its latency maps.
type sinkUnderTest struct {
	name    string
	prog    *ebpf.Program
	on      func(bool) error
	hist    *ebpf.Map
	miss    *ebpf.Map
	verdict uint32
}

func loadSinks(t *testing.T) []sinkUnderTest {
	t.Helper()
	var tc perfSinkTCObjects
	if err := loadPerfSinkTCObjects(&tc, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	var xdp perfSinkXDPObjects
	if err := loadPerfSinkXDPObjects(&xdp, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { xdp.Close() })
	b := func(v bool) uint32 {
		if v {
			return 1
		}
		return 0
	}
	return []sinkUnderTest{
		{"tc", tc.PerfSinkTc, func(v bool) error { return tc.PerfLatOn.Set(b(v)) }, tc.PerfLat, tc.PerfLatMiss, 2},       // TC_ACT_SHOT
		{"xdp", xdp.PerfSinkXdp, func(v bool) error { return xdp.PerfLatOn.Set(b(v)) }, xdp.PerfLat, xdp.PerfLatMiss, 1}, // XDP_DROP
	}
}

// TestSinkLatencyTestRun feeds stamped frames to both sink programs
// (BPF_PROG_TEST_RUN): each latency lands in its slot's histogram in the
// bucket the Go twin (latBucket) computes for the time the run took;
// frames without a usable stamp are counted by reason and not recorded;
// with latency off nothing is recorded.
func TestSinkLatencyTestRun(t *testing.T) {
	testutil.RequireRoot(t)
	env := fakeEnv()
	u := udp(32)
	dst := Addr("dst", 1, 1)
	UDPChecksum6(u, src6, dst)
	tmpl := frame6(env, ipv6(src6, dst, protoUDP, u))
	off, ok := stampSpot(tmpl)
	if !ok {
		t.Fatal("no stamp room in the test frame")
	}
	for _, s := range loadSinks(t) {
		t.Run(s.name, func(t *testing.T) {
			run := func(frame []byte) {
				t.Helper()
				ret, err := s.prog.Run(&ebpf.RunOptions{Data: frame})
				if err != nil {
					t.Fatalf("test run: %v", err)
				}
				if ret != s.verdict {
					t.Fatalf("verdict %d, want %d", ret, s.verdict)
				}
			}
			read := func(slot int) (LatencyHist, LatencyMisses) {
				t.Helper()
				h, m, err := readLatency(s.hist, s.miss, slot)
				if err != nil {
					t.Fatal(err)
				}
				return h, m
			}
			stamped := func(slot int, ts uint64) []byte {
				f := append([]byte(nil), tmpl...)
				applyStamp(f, off, slot, stampCsum(tmpl, off, slot), ts)
				return f
			}
			// Off: counted, not recorded.
			run(stamped(5, monoNow(t)))
			if h, m := read(5); h.Count != 0 || m.Total() != 0 {
				t.Fatalf("latency off: recorded %d, missed %d", h.Count, m.Total())
			}
			if err := s.on(true); err != nil {
				t.Fatal(err)
			}
			ages := []uint64{0, 3000, 40000, 1500000, 2e9, 100e9} // 100 s: past the last bucket
			for i, age := range ages {
				slot := 7 + i
				ts := monoNow(t) - age
				f := stamped(slot, ts)
				run(f)
				after := monoNow(t)
				h, _ := read(slot)
				if h.Count != 1 {
					t.Fatalf("age %d: slot %d recorded %d packets, want 1", age, slot, h.Count)
				}
				lo, hi := age, after-ts // the latency the sink can have seen
				if h.MaxNs < lo || h.MaxNs > hi || h.SumNs != h.MaxNs {
					t.Errorf("age %d: recorded %d ns (sum %d), want within [%d, %d]", age, h.MaxNs, h.SumNs, lo, hi)
				}
				b := -1
				for j, n := range h.Buckets {
					if n != 0 {
						b = j
					}
				}
				if want := latBucket(h.MaxNs); b != want {
					t.Errorf("age %d: the sink put %d ns in bucket %d, Go's latBucket says %d", age, h.MaxNs, b, want)
				}
			}
			// Misses, each by its reason; nothing recorded.
			_, m0 := read(0)
			noStamp := append([]byte(nil), tmpl...)
			run(noStamp)
			run(stamped(latSlots+3, monoNow(t)))
			run(stamped(4, monoNow(t)+60e9)) // a minute in the future
			short := make([]byte, 15)        // an Ethernet header and one byte
			short[12], short[13] = 0x88, 0xb5
			run(short)
			h, m1 := read(4)
			if h.Count != 0 {
				t.Errorf("a stamp from the future was recorded")
			}
			got := m1.Sub(m0).Map()
			want := map[string]uint64{"no-stamp": 1, "bad-slot": 1, "clock": 1, "short": 1}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("misses %v, want %v", got, want)
					break
				}
			}
			if err := s.on(false); err != nil {
				t.Fatal(err)
			}
		})
	}
}
