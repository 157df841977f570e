package testutil

import (
	"net"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/segchain/segchain/internal/nsutil"
)

// TCXIngressCount is the number of TCX ingress programs on dev of
// namespace ns.
func TCXIngressCount(t testing.TB, ns, dev string) int {
	t.Helper()
	var n int
	err := nsutil.Do(ns, func() error {
		i, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		r, err := link.QueryPrograms(link.QueryOptions{Target: i.Index, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			return err
		}
		n = len(r.Programs)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
