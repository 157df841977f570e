package client

import (
	"context"

	"github.com/segchain/segchain/internal/agent"
)

// Journal is a domain's agent.Journal: the journal of a node served
// by a remote agent is kept on that agent (so that it survives the
// controller's host), the others in Local (may be nil: none).
type Journal struct {
	Local  agent.Journal
	Remote map[string]*Client
	// Who names this controller in the journal's header.
	Who string
}

// Record implements agent.Journal. A remote node whose client
// journals on Execute (Client.JournalOnExecute) records the op there.
func (j *Journal) Record(node string, op agent.Op) error {
	if c := j.Remote[node]; c != nil {
		if c.journalWho != "" {
			return nil
		}
		return c.JournalRecord(context.Background(), j.Who, op)
	}
	if j.Local == nil {
		return nil
	}
	return j.Local.Record(node, op)
}

// Clear implements agent.Journal.
func (j *Journal) Clear(node string) error {
	if c := j.Remote[node]; c != nil {
		return c.JournalClear(context.Background())
	}
	if j.Local == nil {
		return nil
	}
	return j.Local.Clear(node)
}

// Unfinished implements agent.Journal.
func (j *Journal) Unfinished(node string) ([]agent.Op, string, error) {
	if c := j.Remote[node]; c != nil {
		return c.JournalUnfinished(context.Background())
	}
	if j.Local == nil {
		return nil, "", nil
	}
	return j.Local.Unfinished(node)
}
