package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nodestate"
)

// seg6Family returns the id of the "SEG6" generic netlink family
// (include/uapi/linux/seg6_genl.h), or ErrNotSupported.
func (h *Handle) seg6Family() (uint16, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seg6ID != 0 {
		return h.seg6ID, nil
	}
	f, err := h.nh.GenlFamilyGet(seg6GenlName)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return 0, fmt.Errorf("generic netlink family %s (CONFIG_IPV6_SEG6_LWTUNNEL): %w", seg6GenlName, ErrNotSupported)
		}
		return 0, fmt.Errorf("generic netlink family %s: %w", seg6GenlName, err)
	}
	h.seg6ID = f.ID
	return f.ID, nil
}

// seg6Request executes one SEG6 genetlink command with attributes.
func (h *Handle) seg6Request(cmd uint8, flags int, attrs ...*nl.RtAttr) ([][]byte, error) {
	id, err := h.seg6Family()
	if err != nil {
		return nil, err
	}
	req := h.request(int(id), flags)
	req.AddData(&nl.Genlmsg{Command: cmd, Version: seg6GenlVersion})
	for _, a := range attrs {
		req.AddData(a)
	}
	return req.Execute(unix.NETLINK_GENERIC, id)
}

func hmacAlgID(alg string) (uint8, error) {
	switch alg {
	case "sha1":
		return hmacAlgoSHA1, nil
	case "sha256", "":
		return hmacAlgoSHA256, nil
	}
	return 0, fmt.Errorf("hmac algorithm %q: want sha1 or sha256", alg)
}

// SetHMACKey sets (or replaces) an HMAC key in the namespace's seg6 key
// table (SEG6_CMD_SETHMAC, like `ip sr hmac set`). An empty Alg means sha256.
func (h *Handle) SetHMACKey(k nodestate.HMACKey) error {
	if k.ID == 0 {
		return errors.New("hmac key id 0 is reserved")
	}
	if len(k.Secret) == 0 || len(k.Secret) > hmacSecretMax {
		return fmt.Errorf("hmac key %d: secret must be 1..%d bytes, got %d", k.ID, hmacSecretMax, len(k.Secret))
	}
	alg, err := hmacAlgID(k.Alg)
	if err != nil {
		return err
	}
	_, err = h.seg6Request(seg6CmdSetHMAC, unix.NLM_F_ACK,
		nl.NewRtAttr(seg6AttrHMACKeyID, nl.Uint32Attr(k.ID)),
		nl.NewRtAttr(seg6AttrSecretLen, nl.Uint8Attr(uint8(len(k.Secret)))),
		nl.NewRtAttr(seg6AttrAlgID, nl.Uint8Attr(alg)),
		nl.NewRtAttr(seg6AttrSecret, k.Secret),
	)
	if err != nil {
		return fmt.Errorf("set hmac key %d in netns %q: %w", k.ID, h.netns, err)
	}
	return nil
}

// DeleteHMACKey removes an HMAC key (SETHMAC with an empty secret). A
// missing key yields an error wrapping unix.ENOENT.
func (h *Handle) DeleteHMACKey(id uint32) error {
	_, err := h.seg6Request(seg6CmdSetHMAC, unix.NLM_F_ACK,
		nl.NewRtAttr(seg6AttrHMACKeyID, nl.Uint32Attr(id)),
		nl.NewRtAttr(seg6AttrSecretLen, nl.Uint8Attr(0)),
		nl.NewRtAttr(seg6AttrAlgID, nl.Uint8Attr(hmacAlgoSHA256)),
	)
	if err != nil {
		return fmt.Errorf("delete hmac key %d in netns %q: %w", id, h.netns, err)
	}
	return nil
}

// HMACKeys dumps the namespace's seg6 HMAC key table (SEG6_CMD_DUMPHMAC),
// sorted by id.
func (h *Handle) HMACKeys() ([]nodestate.HMACKey, error) {
	msgs, err := h.seg6Request(seg6CmdDumpHMAC, unix.NLM_F_DUMP)
	if err != nil {
		return nil, fmt.Errorf("dump hmac keys in netns %q: %w", h.netns, err)
	}
	var out []nodestate.HMACKey
	for _, m := range msgs {
		if len(m) < nl.SizeofGenlmsg {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[nl.SizeofGenlmsg:])
		if err != nil {
			return nil, fmt.Errorf("parse hmac dump: %w", err)
		}
		// The kernel puts the fields at the top level; accept them nested
		// in SEG6_ATTR_HMACINFO too.
		for _, a := range attrs {
			if a.Attr.Type&nlaTypeMask == seg6AttrHMACInfo {
				sub, err := nl.ParseRouteAttr(a.Value)
				if err == nil {
					attrs = append(attrs, sub...)
				}
			}
		}
		var k nodestate.HMACKey
		slen := -1
		for _, a := range attrs {
			v := a.Value
			switch a.Attr.Type & nlaTypeMask {
			case seg6AttrHMACKeyID:
				if len(v) >= 4 {
					k.ID = nl.NativeEndian().Uint32(v)
				}
			case seg6AttrSecret:
				k.Secret = slices.Clone(v)
			case seg6AttrSecretLen:
				if len(v) >= 1 {
					slen = int(v[0])
				}
			case seg6AttrAlgID:
				if len(v) >= 1 {
					switch v[0] {
					case hmacAlgoSHA1:
						k.Alg = "sha1"
					case hmacAlgoSHA256:
						k.Alg = "sha256"
					default:
						k.Alg = fmt.Sprintf("alg%d", v[0])
					}
				}
			}
		}
		if slen >= 0 && slen <= len(k.Secret) {
			k.Secret = k.Secret[:slen]
		}
		if k.ID != 0 {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// TunSrc returns the source address used for seg6 encapsulation
// (SEG6_CMD_GET_TUNSRC); the unspecified address "::" when none is set.
func (h *Handle) TunSrc() (netip.Addr, error) {
	msgs, err := h.seg6Request(seg6CmdGetTunSrc, 0)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("get tunsrc in netns %q: %w", h.netns, err)
	}
	for _, m := range msgs {
		if len(m) < nl.SizeofGenlmsg {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[nl.SizeofGenlmsg:])
		if err != nil {
			return netip.Addr{}, fmt.Errorf("parse tunsrc: %w", err)
		}
		for _, a := range attrs {
			if a.Attr.Type&nlaTypeMask == seg6AttrDst && len(a.Value) == 16 {
				return netip.AddrFrom16([16]byte(a.Value)), nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("get tunsrc in netns %q: no SEG6_ATTR_DST in reply", h.netns)
}

// SetTunSrc sets the seg6 encapsulation source (SEG6_CMD_SET_TUNSRC);
// "::" clears it.
func (h *Handle) SetTunSrc(a netip.Addr) error {
	if !a.Is6() || a.Is4In6() {
		return fmt.Errorf("tunsrc %s: want an IPv6 address", a)
	}
	b := a.As16()
	if _, err := h.seg6Request(seg6CmdSetTunSrc, unix.NLM_F_ACK, nl.NewRtAttr(seg6AttrDst, b[:])); err != nil {
		return fmt.Errorf("set tunsrc %s in netns %q: %w", a, h.netns, err)
	}
	return nil
}
