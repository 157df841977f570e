package session

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"

	"github.com/segchain/segchain/examples"
	"github.com/segchain/segchain/internal/config"
)

// A no-op needs no parse either (docs/scale.md, "Session 17").
//
// The no-op without a plan (noop.go) still loaded the domain: the YAML
// parse and validation of a 1,000-node file is ~0.1 s of CPU, before any
// agent is dialled. What the no-op uses of the parsed domain is small:
// the files it names (for the input digest), its name, its nodes and
// their agents' addresses, the controller's PKI files, whether a node
// speaks BGP through FRR. Each apply that records its inputs also keeps
// that (keptInputs), keyed by the lab and the domain file's path; a later
// apply of the same file reads the file's bytes, takes the names of the
// files the domain names from there, and computes the input digest
// exactly as it would after parsing. Only when that digest is the one
// kept with them, and the record's, is the domain left unparsed.
//
// Why the digest can be trusted with what it did not parse: every field
// of keptInputs is a function of the inputs the digest covers (the build,
// the file's path and bytes, the directory its relative names resolve
// against, the lab), and the apply that kept them computed that digest
// from the parsed domain. The same digest is the same file read by the
// same build: the same parse. A keptInputs naming other files than the
// domain does gives another digest (their names and contents are in
// it), so it cannot lend its digest to a file it does not describe.
//
// The session then holds a Domain made from keptInputs (unparsed.go's
// stub: its name, directory, nodes with their agents, the PKI files;
// no services, chains or links), used only by the no-op's dial and
// checks; Apply parses the file (the same bytes) before it plans when
// any node differs or cannot say (Session.parse).

// keptInputs are what a no-op uses of the domain it does not parse.
type keptInputs struct {
	// Input is the input digest (inputDigest) they were kept with.
	Input string `json:"input"`
	// Domain is the domain's name (the record's file is named after it).
	Domain string `json:"domain"`
	// Files are the files the domain names (domainFiles).
	Files []string `json:"files,omitempty"`
	// Agents has every node, with its nodes.NAME.agent ("" none).
	Agents map[string]string `json:"agents"`
	// PKI are the controller's files (Domain.PKIFiles), absolute.
	PKI [3]string `json:"pki"`
	// FRR: a node speaks BGP through FRR (anyFRRSpeaker).
	FRR bool `json:"frr,omitempty"`
}

// keptInputsPath is where the keptInputs of this session's domain file
// (abs, "" for the built-in default) in its lab are kept: named as the
// lab's records ("lab-NAME-…"), so that lab down removes them with them;
// forgetApplied removes them with the record.
func (s *Session) keptInputsPath(abs string) string {
	lab, prefix := "", "inputs-"
	if s.Lab != nil {
		lab, prefix = s.Lab.Name, "lab-"+s.Lab.Name+"-inputs-"
	}
	h := sha256.Sum256([]byte(lab + "\x00" + abs))
	return filepath.Join(cmp.Or(s.opts.AppliedDir, AppliedDir), prefix+hex.EncodeToString(h[:12])+".json")
}

// keepInputs keeps what a later no-op needs of the parsed domain (the
// record of the apply was just written).
func (s *Session) keepInputs() {
	if s.src == nil || s.input == "" || s.unparsed {
		return
	}
	d := s.Domain
	k := keptInputs{Input: s.input, Domain: d.Name, Files: domainFiles(d), Agents: map[string]string{}, FRR: anyFRRSpeaker(d)}
	for n, nd := range d.Nodes {
		k.Agents[n] = nd.Agent
	}
	k.PKI[0], k.PKI[1], k.PKI[2] = d.PKIFiles()
	b, err := json.Marshal(k)
	if err != nil {
		return
	}
	p := s.keptInputsPath(s.src.path)
	if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, b) {
		return
	}
	tmp := p + ".tmp"
	if os.WriteFile(tmp, b, 0o644) != nil || os.Rename(tmp, p) != nil {
		os.Remove(tmp)
	}
}

// readSource reads the domain file as loadDomainSource would, without
// parsing it: its bytes and absolute path, and the directory its
// relative names resolve against (config.Parse's, Domain.Dir). ok is
// false when anything is amiss (then the file is loaded as ever, which
// says what).
func readSource(path string) (src *domainSource, dir string, ok bool) {
	if path == "" {
		return &domainSource{data: examples.Default}, ".", true
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Size() > config.MaxFileSize {
		return nil, "", false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", false
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, "", false
	}
	return &domainSource{path: abs, data: data, given: path}, filepath.Dir(path), true
}

// openUnparsed readies the session for a no-op without parsing the
// domain file at path: true when its inputs are those kept (keptInputs)
// and the record's; the caller then checks eligibility as ever.
func (s *Session) openUnparsed(path string) bool {
	src, dir, ok := readSource(path)
	if !ok {
		return false
	}
	b, err := os.ReadFile(s.keptInputsPath(src.path))
	if err != nil {
		return false
	}
	var k keptInputs
	if json.Unmarshal(b, &k) != nil || k.Input == "" || len(k.Agents) == 0 {
		return false
	}
	d := &config.Domain{Name: k.Domain, Dir: dir, Nodes: map[string]*config.Node{}}
	for n, a := range k.Agents {
		d.Nodes[n] = &config.Node{Agent: a}
	}
	if k.PKI != ([3]string{}) {
		d.Security.PKI = &config.PKI{CA: k.PKI[0], Cert: k.PKI[1], Key: k.PKI[2]}
	}
	files := append([]string(nil), k.Files...)
	sort.Strings(files)
	s.Domain, s.src = d, src
	if s.inputDigestOf(files) != k.Input {
		s.Domain, s.src = nil, nil
		return false
	}
	s.unparsed, s.keptFRR, s.input = true, k.FRR, k.Input
	return true
}

// parse parses the domain a session opened unparsed (openUnparsed): the
// bytes its input digest was computed from.
func (s *Session) parse() error {
	if !s.unparsed {
		return nil
	}
	var (
		d   *config.Domain
		err error
	)
	// As loadDomainSource (config.LoadSource) parses them.
	if s.src.path == "" {
		d, err = config.Parse(s.src.data, ".")
	} else if d, err = config.Parse(s.src.data, filepath.Dir(s.src.given)); err != nil {
		err = config.InFile(s.src.given, err)
	}
	if err != nil {
		return err
	}
	s.Domain, s.unparsed = d, false
	return nil
}
