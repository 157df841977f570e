package oamsvc

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/rpc/client"
	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/session"
)

// Domain is what a trace of session s's domain works on: the nodes with
// a remote agent are traced through it (the OAM service, on the agent's
// mutual-TLS connection), the others in their namespace on this machine
// (the lab's, or nodes.NAME.netns). Nodes with neither are left out.
func Domain(s *session.Session) oam.Domain {
	c := s.Controller()
	d := oam.Domain{Config: s.Domain, Plan: s.Plan, Netns: map[string]string{},
		Counters: func(ctx context.Context) (map[string][]agent.SIDCounters, error) {
			// Every node at once: the trace's time is mostly this.
			var mu sync.Mutex
			var wg sync.WaitGroup
			var errs []error
			out := map[string][]agent.SIDCounters{}
			for n, a := range c.Agents {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sids, err := a.Counters(ctx)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						errs = append(errs, fmt.Errorf("node %s: %w", n, err))
					}
					out[n] = sids
				}()
			}
			wg.Wait()
			return out, errors.Join(errs...)
		}}
	conns := map[string]grpc.ClientConnInterface{}
	for n, a := range c.Agents {
		if rc, ok := a.(*client.Client); ok {
			conns[n] = rc.Conn()
		}
	}
	if len(conns) > 0 {
		d.Remote = NewClient(conns)
	}
	if s.Lab != nil {
		for n, ns := range s.Lab.Nodes {
			if conns[n] == nil {
				d.Netns[n] = ns
			}
		}
	} else {
		for n, nd := range s.Domain.Nodes {
			if conns[n] == nil && nd.Netns != "" {
				d.Netns[n] = nd.Netns
			}
		}
	}
	return d
}

// anyOAM reports whether a chain of the domain keeps OAM.
func anyOAM(s *session.Session) bool {
	for _, c := range s.Domain.Chains {
		if c != nil && c.OAM != nil && (c.OAM.Sample > 0 || c.OAM.Respond) {
			return true
		}
	}
	return false
}

// Keep hands every agent of session s what it keeps of the domain's
// chains[].oam (apply), or nothing (destroy). Without any chains[].oam an
// agent's refusal (an older build) is not an error: there was nothing to
// keep, only old sets to drop.
func Keep(ctx context.Context, s *session.Session, destroy bool) (*oam.KeepResult, error) {
	d := Domain(s)
	cl, _ := d.Remote.(*Client)
	var k oam.Keeping
	var agents []string
	if cl != nil {
		k = cl
		for n := range cl.conns {
			agents = append(agents, n)
		}
	}
	// The agents' reports of what they keep, read with their digests by
	// this command's apply: only those that differ are handed the set
	// (docs/scale.md). destroy's controller asked none: every agent.
	r, err := oam.KeepDomain(ctx, d, k, agents, destroy, s.Controller().KeptOAM)
	if err != nil && (destroy || !anyOAM(s)) {
		err = nil
	}
	return r, err
}

// Status is the kept sampling of session s's chains (segchain status).
func Status(ctx context.Context, s *session.Session) []oam.KeptChain {
	if !anyOAM(s) {
		return nil
	}
	d := Domain(s)
	var k oam.Keeping
	if cl, ok := d.Remote.(*Client); ok {
		k = cl
	}
	return oam.KeptSampling(ctx, d, k)
}
