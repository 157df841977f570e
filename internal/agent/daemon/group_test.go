package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/rpc/client"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/pki"
	"github.com/segchain/segchain/internal/testutil"
)

// One group process serves two nodes: each answers over mutual TLS as
// itself (its own certificate: a controller that expects the other node
// at that address is refused), observes its own namespace, and refuses a
// controller not on the allow list.
func TestGroupServesEachNodeAsItself(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	pk := filepath.Join(dir, "pki")
	if err := pki.Init(pk, "group test"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"ctl", "other"} {
		if _, err := pki.Issue(pk, pki.RoleController, c, pki.IssueOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	names := []string{"a", "b"}
	var nodes []agent.GroupNode
	for _, n := range names {
		if _, err := pki.Issue(pk, pki.RoleNode, n, pki.IssueOptions{}); err != nil {
			t.Fatal(err)
		}
		ns := testutil.NewNetns(t, "grp"+n)
		// A route of the domain's in each namespace, told apart by node.
		dst := map[string]string{"a": "fc00:a::/64", "b": "fc00:b::/64"}[n]
		testutil.Exec(t, ns, "ip", "-6", "route", "add", "unreachable", dst, "proto", "202")
		nodes = append(nodes, agent.GroupNode{Node: n, Netns: ns, Listen: "[::1]:0", StateDir: filepath.Join(dir, "state", n)})
	}
	file, ready := filepath.Join(dir, "nodes.json"), filepath.Join(dir, "ready.json")
	b, _ := json.Marshal(nodes)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runGroup(ctx, groupFlags{nodes: file, pkiDir: pk, ready: ready, logFormat: "text", allowControllers: []string{"ctl"}}, Build{}, &strings.Builder{})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("group: %v", err)
		}
	})
	var addrs map[string]string
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(ready)
		if err == nil && json.Unmarshal(b, &addrs) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the group never wrote its ready file")
		}
		time.Sleep(20 * time.Millisecond)
	}
	dial := func(ctl, node, addr string) *client.Client {
		t.Helper()
		tc, err := pki.ClientTLS(pki.DirFiles(pk, pki.RoleController, ctl), node)
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.Dial(node, addr, tc)
		if err != nil {
			t.Fatal(err)
		}
		c.SetTimeout(10 * time.Second)
		t.Cleanup(func() { c.Close() })
		return c
	}
	for _, n := range names {
		c := dial("ctl", n, addrs[n])
		got, err := c.Observe(ctx, &nodestate.Node{})
		if err != nil {
			t.Fatalf("node %s: %v", n, err)
		}
		if len(got.Routes) != 1 || !strings.Contains(got.Routes[0].String(), "fc00:"+n+"::") {
			t.Errorf("node %s observed %v, want its own route alone", n, got.Routes)
		}
		d, err := c.ObserveDigest(ctx, &nodestate.Node{}, nodestate.Digest(nil, nil), true)
		if err != nil {
			t.Fatalf("node %s: digest: %v", n, err)
		}
		if d.State != nodestate.Digest(got, &nodestate.Node{}) {
			t.Errorf("node %s: digest %s, its observed state's %s", n, d.State, nodestate.Digest(got, &nodestate.Node{}))
		}
	}
	// b's address, a's name expected: b's certificate is refused.
	if _, err := dial("ctl", "a", addrs["b"]).Health(ctx); err == nil || !strings.Contains(err.Error(), "agent certificate names node") {
		t.Errorf("a controller expecting node a at b's address: %v, want b's certificate refused", err)
	}
	// A controller not allowed is refused by the node's listener.
	if _, err := dial("other", "a", addrs["a"]).Health(ctx); err == nil {
		t.Error("a controller outside --allow-controller was served")
	}
}

func TestReadGroupRefusesBadEntries(t *testing.T) {
	f := filepath.Join(t.TempDir(), "g.json")
	os.WriteFile(f, []byte(`[{"node":"a","netns":"x","listen":"[::1]:0","state_dir":"/tmp/a"},{"node":"a","listen":"nope"}]`), 0o644)
	_, err := ReadGroup(f)
	for _, want := range []string{`[1].node: "a" listed twice`, "[1].netns: required", `[1].listen: "nope"`, "[1].state_dir: required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadGroup: %v, want %q", err, want)
		}
	}
}
