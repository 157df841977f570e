package reconcile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/segchain/segchain/internal/nodestate"
)

// File is the intent's file name in the agent's state directory.
const File = "intent.json"

// Intent is a node's last applied intent, as its agent keeps it.
type Intent struct {
	Node string `json:"node"`
	// Want is the node's desired state; only its name after a destroy
	// ("nothing").
	Want *nodestate.Node `json:"want"`
	// By names the controller that handed it (its lease holder), At when.
	By string    `json:"by"`
	At time.Time `json:"at"`
	// Superseded, when set, says why the intent is suspended: a
	// controller has changed the node since (an apply running, or one
	// that failed and was rolled back) and has not handed a new intent.
	// Reconcile never acts on a suspended intent: it could undo what an
	// operator just applied.
	Superseded string `json:"superseded,omitempty"`
}

// onDisk is an Intent as its file holds it: with the secrets of its HMAC
// keys by key id, which have no JSON form of their own
// (nodestate.HMACKey). The file is the agent's alone (mode 0600, in a
// 0700 directory): reconcile re-installs a key the node lost with them.
type onDisk struct {
	Intent
	HMACSecrets map[uint32][]byte `json:"hmac_secrets,omitempty"`
}

func toDisk(in *Intent) *onDisk {
	d := &onDisk{Intent: *in}
	if in.Want != nil {
		for _, k := range in.Want.HMACKeys {
			if len(k.Secret) > 0 {
				if d.HMACSecrets == nil {
					d.HMACSecrets = map[uint32][]byte{}
				}
				d.HMACSecrets[k.ID] = k.Secret
			}
		}
	}
	return d
}

// fromDisk returns the intent of d, its keys' secrets put back.
func fromDisk(d *onDisk) (*Intent, error) {
	in := d.Intent
	if in.Want == nil {
		return &in, nil
	}
	for id, sec := range d.HMACSecrets {
		i := slices.IndexFunc(in.Want.HMACKeys, func(k nodestate.HMACKey) bool { return k.ID == id })
		if i < 0 {
			return nil, fmt.Errorf("hmac_secrets: no hmac key %d", id)
		}
		in.Want.HMACKeys[i].Secret = sec
	}
	return &in, nil
}

// Nothing reports whether the intent is that nothing be installed (the
// domain was destroyed).
func (in *Intent) Nothing() bool {
	w := in.Want
	return w == nil || len(w.Routes)+len(w.Rules)+len(w.Services)+len(w.HMACKeys)+len(w.Sysctls) == 0 && w.TunSrc == "" && w.Boundary == nil
}

// Store keeps one node's intent in a file, replaced atomically (written
// to a temporary file, fsync'd, renamed over the old one, the directory
// fsync'd), so that it survives agent restarts and crashes whole. It
// implements server.IntentStore.
type Store struct {
	path string
	node string

	mu  sync.Mutex
	cur *Intent // never modified once stored: replaced
}

// Open reads node's intent from dir/intent.json, if there is one. The
// store is returned even with an error (a file it cannot read, or of
// another node): it is then empty, the file is left alone until the next
// apply replaces it, and reconcile waits for that apply.
func Open(dir, node string) (*Store, error) {
	s := &Store{path: filepath.Join(dir, File), node: node}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("intent: %w", err)
	}
	var d onDisk
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err = dec.Decode(&d)
	var in *Intent
	if err == nil {
		in, err = fromDisk(&d)
	}
	if err != nil {
		return s, fmt.Errorf("intent %s: %w (ignored: the next apply replaces it)", s.path, err)
	}
	if in.Node != node || in.Want == nil || in.Want.Name != node {
		return s, fmt.Errorf("intent %s is node %q's, this agent serves %q (ignored: the next apply replaces it)", s.path, in.Node, node)
	}
	s.cur = in
	return s, nil
}

// Get returns the intent (nil: none handed yet). It must not be modified.
func (s *Store) Get() *Intent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Kept implements server.IntentReader: the intent in force, nil when
// none was handed or it is suspended (Supersede).
func (s *Store) Kept() *nodestate.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.cur.Superseded != "" {
		return nil
	}
	return s.cur.Want
}

// SetIntent stores want as the node's intent, handed by by; the same
// intent again (a no-op apply) writes nothing.
func (s *Store) SetIntent(want *nodestate.Node, by string) error {
	if want == nil || want.Name != s.node {
		return fmt.Errorf("intent: not node %s's", s.node)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.Superseded == "" && sameState(s.cur.Want, want) {
		return nil
	}
	next := &Intent{Node: s.node, Want: want, By: by, At: time.Now().UTC()}
	if err := s.write(next); err != nil {
		return err
	}
	s.cur = next
	return nil
}

// Supersede suspends the intent (a controller is changing the node),
// saying why; a no-op when there is none or it is suspended already.
func (s *Store) Supersede(why string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.cur.Superseded != "" {
		return nil
	}
	next := *s.cur
	next.Superseded = why
	if err := s.write(&next); err != nil {
		return err
	}
	s.cur = &next
	return nil
}

// sameState compares two intents, their HMAC secrets included (a rotated
// key is a new intent).
func sameState(a, b *nodestate.Node) bool {
	x, err1 := json.Marshal(toDisk(&Intent{Want: a}))
	y, err2 := json.Marshal(toDisk(&Intent{Want: b}))
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// write replaces the file atomically.
func (s *Store) write(in *Intent) error {
	b, err := json.MarshalIndent(toDisk(in), "", "  ")
	if err != nil {
		return fmt.Errorf("intent: %w", err)
	}
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("intent: %w", err)
	}
	f, err := os.CreateTemp(dir, ".intent-*.tmp") // mode 0600
	if err != nil {
		return fmt.Errorf("intent: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("intent %s: %w", s.path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("intent: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("intent: fsync %s: %w", dir, err)
	}
	return nil
}
