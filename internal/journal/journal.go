package journal

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodelock"
)

// Dir holds one directory per node (named by its node id, the netns
// identity), each with at most one journal file.
const Dir = "/run/segchain/journal"

const file = "journal"

// line is one line of the file: the header (who wrote it), then one op
// each.
type line struct {
	Header *nodelock.Holder `json:"header,omitempty"`
	Op     *agent.Op        `json:"op,omitempty"`
}

// Disk is the journal of one command over its nodes. It implements
// controller.Journal.
type Disk struct {
	mu    sync.Mutex // nodes are journaled in parallel (controller.Concurrency)
	root  string
	ids   map[string]string // node name → node id (directory)
	files map[string]*os.File
	me    nodelock.Holder
}

// New returns the journal for nodes (name → node id) under root ("" =
// Dir).
func New(root string, ids map[string]string) *Disk {
	if root == "" {
		root = Dir
	}
	return &Disk{root: root, ids: ids, files: map[string]*os.File{},
		me: nodelock.Self()}
}

func (d *Disk) dir(node string) (string, error) {
	id, ok := d.ids[node]
	if !ok || id == "" {
		return "", fmt.Errorf("journal: no id for node %s", node)
	}
	return filepath.Join(d.root, id), nil
}

// Record appends op to node's journal and syncs it to disk before
// returning: the op may run only after that.
func (d *Disk) Record(node string, op agent.Op) error {
	return d.RecordAll(node, []agent.Op{op})
}

// RecordAll appends ops to node's journal and syncs them to disk, all with
// one fsync, before returning: the ops may run only after that, in order.
// Journaling a batch before any of it runs is as safe as journaling each
// op right before it runs: recovery undoes the journal in reverse, and
// the inverse of an op that never ran finds the state the op would have
// left alone (a replace with the same value, a delete of what does not
// exist: controller.Recover skips what fails).
func (d *Disk) RecordAll(node string, ops []agent.Op) error {
	if len(ops) == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.files[node]
	var buf []byte
	if f == nil {
		dir, err := d.dir(node)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		f, err = os.OpenFile(filepath.Join(dir, file), os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		d.files[node] = f
		h := d.me
		h.Node = node
		if buf, err = appendLine(buf, line{Header: &h}); err != nil {
			return err
		}
		// The header alone first, with the directory entries: a
		// journal found on disk always names its writer.
		if err := write(f, buf); err != nil {
			return err
		}
		buf = buf[:0]
		if err := syncDir(dir); err != nil {
			return err
		}
		if err := syncDir(d.root); err != nil {
			return err
		}
	}
	for i := range ops {
		var err error
		if buf, err = appendLine(buf, line{Op: &ops[i]}); err != nil {
			return err
		}
	}
	return write(f, buf)
}

func appendLine(buf []byte, l line) ([]byte, error) {
	b, err := json.Marshal(l)
	if err != nil {
		return buf, fmt.Errorf("journal: %w", err)
	}
	return append(append(buf, b...), '\n'), nil
}

// write appends b (whole lines) to f and syncs it.
func write(f *os.File, b []byte) error {
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("journal %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("journal %s: fsync: %w", f.Name(), err)
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("journal: fsync %s: %w", dir, err)
	}
	return nil
}

// Clear removes node's journal: its ops are complete, or undone.
func (d *Disk) Clear(node string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f := d.files[node]; f != nil {
		f.Close()
		delete(d.files, node)
	}
	dir, err := d.dir(node)
	if err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, file)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("journal: %w", err)
	}
	switch err := os.Remove(dir); {
	case errors.Is(err, os.ErrNotExist):
		// Nothing was ever recorded for node (a rollback of a command
		// that failed before its first op here): nothing to clear, and
		// the root may not exist either.
		return nil
	case err != nil:
		return fmt.Errorf("journal: %w", err)
	}
	return syncDir(d.root)
}

// Unfinished returns the ops of node's journal left by a command that did
// not end (none: no journal), and who wrote it. A torn last line (the
// writer killed mid-write) was never synced, so its op never ran: it is
// skipped.
func (d *Disk) Unfinished(node string) ([]agent.Op, string, error) {
	dir, err := d.dir(node)
	if err != nil {
		return nil, "", nil // a node without an id (its netns is gone) has no journal
	}
	f, err := os.Open(filepath.Join(dir, file))
	if errors.Is(err, os.ErrNotExist) {
		// A command killed between making the journal's directory and
		// its file (or between removing the two) left the directory
		// alone: nothing to undo, nothing to keep (Remove leaves a
		// directory that is not empty).
		_ = os.Remove(dir)
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	var (
		ops []agent.Op
		who = "an unknown command"
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			break
		}
		switch {
		case l.Header != nil:
			who = l.Header.String()
		case l.Op != nil:
			if k := l.Op.Kind; k == "proxies" || k == "firewalls" {
				// Before the service-kind seam a node's proxies and
				// firewalls had ops of their own; their fields are gone.
				return nil, who, fmt.Errorf("journal of node %s was written by an older segchain (a %q op, now a %q op of a service kind): finish or undo that command with the segchain that started it, or remove %s",
					node, k, agent.KindServices, filepath.Join(dir, file))
			}
			ops = append(ops, *l.Op)
		}
	}
	return ops, who, nil
}

// Close releases the open journal files (they stay on disk).
func (d *Disk) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for n, f := range d.files {
		f.Close()
		delete(d.files, n)
	}
}
