package session

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/controller"
	"github.com/segchain/segchain/internal/devprofile"
)

// A no-op needs no plan (docs/scale.md, "Session 16").
//
// The record of the last successful apply (Applied, scope.go) keeps every
// node's intent digest and, since session 16, a digest of everything the
// plan is a function of (Applied.Input, inputDigest). When this command's
// inputs have that digest, its plan would be the recorded apply's, node
// for node: instead of planning (0.7 s of one core and ~130 MB at 1,000
// nodes) and sending each agent its desired state, apply asks each agent
// to observe its node against the intent it keeps if that intent's digest
// is the recorded one (controller.KeptUnchanged, one ObserveDigest per
// node as before, with no desired state in it). Every node in sync with
// that intent, and no journal unfinished: nothing to do. Any doubt and the
// command plans and applies as ever (Session.Apply).

// inputDigest is the digest of everything plan.Build and the session's
// no-op read, "" when it cannot be said (then nothing is skipped):
//
//   - the build: plan.Build is code, and the defaults config.Parse applies
//     are too; an upgraded (or merely rebuilt) segchain never trusts a
//     record of another build (buildIdentity: the Go build ID of the
//     running executable, which changes with any of its sources, and the
//     Go release);
//   - the domain as read: the file's bytes (not the parsed Domain: its
//     JSON leaves out the service kinds' blocks and Dir, and the raw bytes
//     are a stricter key), its absolute path and the directory relative
//     files resolve against (Domain.Dir); the built-in default domain's
//     bytes when there is no file. A domain handed in memory
//     (Options.Domain) has no raw form: "";
//   - every file the domain names, which config's validation and the plan
//     read (HMAC keys' secret_file: plan.hmac; a firewall's rules_file; a
//     netfilter service's ruleset): found by walking the parsed domain,
//     service kinds' blocks included, for string fields whose YAML key
//     ends in "_file" or is "ruleset" (domainFiles), each hashed with its
//     resolved absolute path and its content, or the error reading it;
//   - the lab (its name and the file it was brought up from): the record
//     is kept per lab already; the lab's routers' FRR is not an input,
//     a lab with FRR never takes this path.
//
// plan.Build reads nothing else: no environment variable, clock or random
// source (go list -deps of internal/plan: only config's loader and the
// two service kinds above open files), and its output is a function of
// the Domain alone.
func (s *Session) inputDigest() string {
	if s.src == nil {
		return ""
	}
	return s.inputDigestOf(domainFiles(s.Domain))
}

// inputDigestOf is inputDigest with the files the domain names given
// (domainFiles' answer, or the one kept with the record: unparsed.go).
func (s *Session) inputDigestOf(files []string) string {
	if s.src == nil {
		return ""
	}
	id := s.opts.identity
	if id == "" {
		id = buildIdentity()
	}
	if id == "" {
		return ""
	}
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte("segchain no-op inputs v1"))
	field([]byte(id))
	field([]byte(s.src.path))
	field(s.src.data)
	field([]byte(s.Domain.Dir))
	if s.Lab != nil {
		field([]byte("lab " + s.Lab.Name))
		field([]byte(s.Lab.File))
	}
	for _, f := range files {
		hashFile(h, field, f)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// hashFile adds file path's resolved name and content (or why it could
// not be read) to h.
func hashFile(h hash.Hash, field func([]byte), path string) {
	field([]byte(path))
	b, err := os.ReadFile(path)
	if err != nil {
		field([]byte("error: " + err.Error()))
		return
	}
	sum := sha256.Sum256(b)
	field(sum[:])
}

// domainFiles are the files domain d names (string fields whose YAML key
// ends in "_file" or is "ruleset", in the service kinds' blocks too),
// resolved against d.Dir, absolute, sorted, each once.
func domainFiles(d *config.Domain) []string {
	seen := map[string]bool{}
	may := map[reflect.Type]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		if !mayHoldFile(v.Type(), may) {
			return // e.g. the nodes, links: most of a large domain
		}
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			t := v.Type()
			for i := 0; i < t.NumField(); i++ {
				f := t.Field(i)
				if !f.IsExported() {
					continue
				}
				fv := v.Field(i)
				if fileKey(f) {
					if p := fv.String(); p != "" {
						if !filepath.IsAbs(p) {
							p = filepath.Join(d.Dir, p)
						}
						if abs, err := filepath.Abs(p); err == nil {
							p = abs
						}
						seen[p] = true
					}
					continue
				}
				walk(fv)
			}
		case reflect.Map:
			it := v.MapRange()
			for it.Next() {
				walk(it.Value())
			}
		case reflect.Slice, reflect.Array:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(d))
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// fileKey: a string field under this YAML key names a file.
func fileKey(f reflect.StructField) bool {
	key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return f.Type.Kind() == reflect.String && (strings.HasSuffix(key, "_file") || key == "ruleset")
}

// mayHoldFile: a value of type t may hold a field naming a file
// (fileKey), directly or through its fields, elements or an interface
// (whose dynamic type is not known from t). memo holds the answers of
// one walk; a type being decided counts as no (a cycle adds nothing).
func mayHoldFile(t reflect.Type, memo map[reflect.Type]bool) bool {
	if v, ok := memo[t]; ok {
		return v
	}
	memo[t] = false
	v := false
	switch t.Kind() {
	case reflect.Interface:
		v = true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		v = mayHoldFile(t.Elem(), memo)
	case reflect.Map:
		v = mayHoldFile(t.Elem(), memo)
	case reflect.Struct:
		for i := 0; i < t.NumField() && !v; i++ {
			f := t.Field(i)
			v = f.IsExported() && (fileKey(f) || mayHoldFile(f.Type, memo))
		}
	}
	memo[t] = v
	return v
}

// buildIdentity is the running executable's Go build ID (its ELF note,
// a hash of everything the linker was given) and the Go release, "" when
// it cannot be read (then no record is trusted). It is read through
// /proc/self/exe, the file this process runs even when its path now names
// another (a binary replaced while the command ran must not lend the old
// code's record the new build's identity).
var buildIdentity = sync.OnceValue(func() string {
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		return ""
	}
	defer f.Close()
	sec := f.Section(".note.go.buildid")
	if sec == nil {
		return ""
	}
	b, err := sec.Data()
	if err != nil || len(b) < 16 {
		return ""
	}
	return runtime.Version() + " " + hex.EncodeToString(b)
})

// domainSource is the domain file's bytes as parsed: the input digest
// hashes exactly what was planned.
type domainSource struct {
	path string // absolute; "" for the built-in default
	data []byte
	// given is the path as the command named it (config.LoadSource's:
	// Domain.Dir is its directory).
	given string
}

// keptEligible is the record whose intents this command may check its
// agents against without planning (nil: plan as ever). Only a plain
// apply (not a dry run, not --changed-only: Options.NoOpFirst), keeping
// records, with no FRR to keep in step in a lab and no chains[].oam (what
// apply hands the agents besides their intents comes from the plan), whose
// inputs (inputDigest) are the record's, every node of the domain in the
// record and no other.
func (s *Session) keptEligible() *Applied {
	o := s.opts
	if !o.NoOpFirst || o.DryRun || o.ChangedOnly || !s.records() || s.input == "" {
		return nil
	}
	frr := s.keptFRR // an unparsed domain's (unparsed.go)
	if !s.unparsed {
		frr = anyFRRSpeaker(s.Domain)
	}
	if s.Lab != nil && (len(s.Lab.FRR) > 0 || frr) {
		return nil
	}
	if OAMDigest(s.Domain) != "" {
		return nil
	}
	rec, err := readApplied(s.appliedPath())
	if err != nil || rec == nil || rec.Input != s.input || rec.Domain != s.Domain.Name || rec.OAM != "" {
		return nil
	}
	names := s.Domain.NodeNames()
	if len(rec.Nodes) != len(names) {
		return nil
	}
	for _, n := range names {
		if rec.Nodes[n] == "" {
			return nil
		}
	}
	return rec
}

// anyFRRSpeaker: a node of d runs FRR (the plan's Plan.FRR).
func anyFRRSpeaker(d *config.Domain) bool {
	for n := range d.Nodes {
		if d.Speaker(n) == config.SpeakerFRR {
			return true
		}
	}
	return false
}

// openKept readies the session to check its agents against rec's intents
// without a plan: every node's agent (the early-dialled remote ones, or
// Options.Agents), a controller with no plan. False (and nothing kept)
// when a node has no agent that can be asked so.
func (s *Session) openKept(rec *Applied) (bool, error) {
	agents := s.opts.Agents
	if agents == nil {
		if s.early == nil {
			return false, nil
		}
		s.remote, s.tickets = s.early.remote, s.early.tickets
		if s.early.err != nil {
			return false, nil // the full path says why
		}
		// Not waiting for every connection (early.use): each node is
		// asked as soon as its own is set up (a call waits for its
		// connection while it is being set up), so the first answers
		// come while the last connections are made (docs/scale.md,
		// "Session 17"). A connection that failed to set up fails its
		// call: the node cannot say, and the full path (agents) waits
		// for the set-up, dials such agents again and asks them afresh.
		agents = map[string]agent.Agent{}
		for n, rc := range s.remote {
			agents[n] = rc
		}
	}
	for n := range rec.Nodes {
		if a := agents[n]; a == nil || a.Caps().Kept == nil {
			return false, nil
		}
	}
	c := &controller.Controller{Agents: agents, NodeTimeout: s.opts.NodeTimeout, Concurrency: remoteConcurrency}
	if s.Lab != nil {
		c.Outside = routersInStep(s.Lab, s.Domain)
		c.BGPStarted = s.nudge
	}
	s.ctl, s.kept = c, rec
	return true, nil
}

// keptNoOp is the apply of a session opened without a plan (openKept):
// done when every node is unchanged against the intent it keeps
// (controller.KeptUnchanged); otherwise ok is false and drift says
// whether an agent found its node differing from that intent (then the
// agents' digests need not be asked again against the plan).
func (s *Session) keptNoOp(ctx context.Context) (res *controller.Result, ok, drift bool, err error) {
	ok, drift, diffs := s.ctl.KeptUnchanged(ctx, s.kept.Nodes)
	devprofile.Phase("kept digests (unlocked, no plan)")
	if !ok {
		fmt.Fprintf(s.log, "segchain: note: a node differs from its kept intent, or could not say: planning\n")
		return nil, false, drift, nil
	}
	res = &controller.Result{Diffs: diffs, NotPlanned: true}
	if s.ctl.Outside != nil {
		done, err := s.ctl.Outside()
		if err != nil {
			return res, true, false, err
		}
		return res, true, false, done(nil)
	}
	return res, true, false, nil
}
