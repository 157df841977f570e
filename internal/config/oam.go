package config

// ChainOAM is what a chain keeps of its OAM (docs/oam.md, "Kept by
// apply"): O-flag sampling and the native-SID echo responder, installed
// by apply on the nodes' agents and removed by destroy.
type ChainOAM struct {
	// Sample: the headend sets the O-flag on 1 in Sample of the chain's
	// packets (0: no sampling).
	Sample int `yaml:"sample,omitempty" json:"sample,omitempty"`
	// Respond: the nodes of the chain's native SIDs answer ICMPv6 echo to
	// their SIDs (bpf/oam_echo.bpf.c).
	Respond bool `yaml:"respond,omitempty" json:"respond,omitempty"`
}

// MaxSampleRate bounds chains[].oam.sample.
const MaxSampleRate = 1 << 30

// chainOAM checks every chain's oam: a rate in range, and a chain whose
// SRH the marker can recognise and may change.
func (v *validator) chainOAM() {
	for _, name := range sortedKeys(v.d.Chains) {
		c := v.d.Chains[name]
		if c == nil || c.OAM == nil {
			continue
		}
		p := "chains." + name + ".oam.sample"
		n := c.OAM.Sample
		switch {
		case n == 0:
			continue
		case n < 0 || n > MaxSampleRate:
			v.errf(p, "%d: want 1..%d (1 in N packets; 0 or absent: no sampling)", n, MaxSampleRate)
		}
		// A chain signed with HMAC is sampled too: the headend's boundary
		// filter marks, the kernel encapsulates with the O-flagged copy of
		// the route and signs the flags (docs/oam.md). Where the TCX
		// marker must mark instead (no boundary filter on the headend's
		// way in), its packets are counted, not marked.
		if v.d.Compressed() {
			v.errf(p, "not with sid.format %s: the SRH carries uSID containers, not the chain's SIDs the marker recognises", v.d.SID.Format)
		}
		for _, sv := range c.Services {
			if s := v.d.Services[sv]; s != nil && s.IsPool() {
				// The headend's selector rewrites the pool's SID per flow:
				// the marker would not know the SRH, the taps not the
				// instance's node.
				v.errf(p, "service %s is a pool: sampling a chain through a pool is not supported", sv)
			}
		}
		if (c.Mode == ModeEncapRed || c.Mode == ModeL2EncapRed) && len(c.Services) == 0 {
			v.errf(p, "a one-SID reduced encapsulation (%s) has no SRH to set the O-flag in", c.Mode)
		}
	}
}

func init() {
	for k, v := range map[string]string{
		"Chain.oam":        "OAM kept running for the chain by apply on its nodes' agents, removed by destroy (docs/oam.md, \"Kept by apply\").",
		"ChainOAM":         "A chain's kept OAM.",
		"ChainOAM.sample":  "O-flag sampling (RFC 9259 §2.1): the headend sets the SRH's O-flag on 1 in N of the chain's packets (1..1073741824; 0: off); the agents of the chain's segment nodes timestamp them, export per-node counts and `segchain status` shows per-hop latency. A chain signed with HMAC is sampled where the headend's boundary filter marks (the kernel signs the O-flag); not through a pool, nor with a compressed sid.format (f3216, f4816, csid).",
		"ChainOAM.respond": "The nodes of the chain's SIDs answer ICMPv6 echo requests to their native SIDs (segchain's echo responder: Linux's seg6local drops them), so that `ping` and iputils' `ping -6 SID` get replies.",
	} {
		fieldDoc[k] = v
	}
	schemaExtra["ChainOAM.sample"] = map[string]any{"minimum": 0, "maximum": MaxSampleRate}
}
