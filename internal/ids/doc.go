// Package ids is an SRv6-aware intrusion detection and prevention engine
// after SR-Snort: it applies rules written in a documented subset of the
// Suricata/Snort rule language (plus srv6.* keywords on the segment list,
// Segments Left and ARGS) to the inner packet of SRv6 traffic, and returns a
// verdict (forward or drop) with Suricata-EVE-style alerts.
//
// It is pure Go and knows nothing about how packets arrive: a SID-bound
// userspace service hands it a Packet (inner packet bytes plus SRH metadata)
// and acts on the Verdict. Content rules are prefiltered by one
// Aho–Corasick automaton over every rule's fast pattern, rules without
// content by a protocol/port index, so the cost per packet stays nearly
// flat with thousands of rules. Within the subset it follows Suricata 7's
// semantics (address lists per family, byte-wise pcre...), checked against
// the real Suricata by TestSuricataDifferential. The rule subset, the SR
// keywords, the verdict order and the EVE format are documented in
// docs/ids.md.
package ids
