package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	pb "github.com/segchain/segchain/internal/agent/rpc/agentpb"
	"github.com/segchain/segchain/internal/journal"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/pki"
)

// intents records the intent a controller hands.
type intents struct{ got *nodestate.Node }

func (i *intents) SetIntent(want *nodestate.Node, _ string) error { i.got = want; return nil }

// HMAC secrets cross the mTLS channel in their own fields: the agent
// runs a key set with its secret, Observe returns the node's secret
// (a rotation is told from a re-apply), an intent keeps its secrets; the
// agent's log and journal never hold one.
func TestHMACSecretsOverTheWire(t *testing.T) {
	dir, tc := newPKI(t)
	installed := []byte("installed-secret-0123456789abcdef!")
	want := []byte("desired-secret-0123456789abcdef-xyz")
	k := agenttest.New("nfv1") // its node holds an HMAC key
	k.State.HMACKeys = []nodestate.HMACKey{{ID: 7, Alg: "sha256", Secret: installed}}
	var logBuf bytes.Buffer
	log := slog.New(slog.NewTextHandler(syncWriter{&logBuf}, nil))
	root := t.TempDir()
	jr := journal.New(root, map[string]string{"nfv1": "node-nfv1"})
	s := NewServer(k, log, Build{}, jr, Hooks{})
	in := &intents{}
	s.KeepIntents(in)
	e := &env{dir: dir, fake: k, addr: listen(t, s, tc, log)}
	c := e.client(t, pki.DirFiles(dir, pki.RoleController, "ctl"), "nfv1")
	ctx := context.Background()

	got, err := c.Observe(ctx, &nodestate.Node{Name: "nfv1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.HMACKeys) != 1 || !bytes.Equal(got.HMACKeys[0].Secret, installed) {
		t.Fatalf("observed keys %v: want key 7 with the installed secret", got.HMACKeys)
	}
	if err := c.AcquireLease(ctx, "ctl", time.Minute); err != nil {
		t.Fatal(err)
	}
	c.JournalOnExecute("pid 7 (segchain apply) on host ctl")
	old := got.HMACKeys[0]
	set := agent.Op{Kind: agent.KindHMAC, Action: agent.ActSet, HMAC: &nodestate.HMACKey{ID: 7, Alg: "sha256", Secret: want}, OldHMAC: &old}
	if _, err := c.Execute(ctx, []agent.Op{addOp, set, set.Inverse()}); err != nil {
		t.Fatal(err)
	}
	ran := e.fake.Executed()
	if len(ran) != 3 || !bytes.Equal(ran[1].HMAC.Secret, want) || !bytes.Equal(ran[2].HMAC.Secret, installed) {
		t.Fatalf("the agent ran %v: want the key set with the desired secret, then back to the installed one", ran)
	}
	if err := c.SetIntent(ctx, &nodestate.Node{Name: "nfv1", HMACKeys: []nodestate.HMACKey{{ID: 7, Alg: "sha256", Secret: want}}}); err != nil {
		t.Fatal(err)
	}
	if in.got == nil || len(in.got.HMACKeys) != 1 || !bytes.Equal(in.got.HMACKeys[0].Secret, want) {
		t.Fatalf("intent handed: %+v, want key 7 with its secret", in.got)
	}

	jf, err := os.ReadFile(filepath.Join(root, "node-nfv1", "journal"))
	if err != nil {
		t.Fatal(err)
	}
	lockedBuf.Lock()
	logged := logBuf.String()
	lockedBuf.Unlock()
	for _, sec := range [][]byte{installed, want} {
		for _, form := range []string{string(sec), base64.StdEncoding.EncodeToString(sec), hex.EncodeToString(sec)} {
			if strings.Contains(logged, form) {
				t.Errorf("the agent's log holds a secret:\n%s", logged)
			}
			if strings.Contains(string(jf), form) {
				t.Errorf("the agent's journal holds a secret:\n%s", jf)
			}
		}
	}
	if !strings.Contains(logged, "hmac 7 sha256") {
		t.Errorf("the ops are not logged (the check above proves nothing):\n%s", logged)
	}
}

// A secret for an op that sets no key, or a key set without its secret
// (a controller of an older build), is refused before anything runs.
func TestHMACSecretsRefused(t *testing.T) {
	e := serve(t)
	c, _ := e.raw(t)
	ctx := context.Background()
	l, err := c.AcquireLease(ctx, &pb.AcquireLeaseRequest{Holder: "ctl", TtlSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	set := agent.Op{Kind: agent.KindHMAC, Action: agent.ActSet, HMAC: &nodestate.HMACKey{ID: 7, Alg: "sha256"}}
	b, _ := agent.MarshalOps([]agent.Op{addOp, set})
	for _, tc := range []struct {
		name    string
		secrets []*pb.OpSecret
		want    string
	}{
		{"no secret", nil, "no secret sent"},
		{"secret of a tunsrc op", []*pb.OpSecret{{Op: 0, Secret: []byte("x")}, {Op: 1, Secret: []byte("y")}}, "op 0 does not set an hmac key"},
		{"secret out of range", []*pb.OpSecret{{Op: 9, Secret: []byte("x")}}, "op 9 does not set an hmac key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Execute(ctx, &pb.ExecuteRequest{LeaseId: l.LeaseId, OpsJson: b, OpSecrets: tc.secrets})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if n := len(e.fake.Executed()); n != 0 {
				t.Fatalf("the agent ran %d op(s)", n)
			}
		})
	}
}
