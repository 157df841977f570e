package proxy

// DropReason is why the proxy program dropped a packet (the index of the
// per-SID drop counters).
type DropReason uint32

// Drop reasons, generated from enum proxy_drop_reason.
const (
	DropTruncated   = DropReason(proxyTCProxyDropReasonPROXY_DROP_TRUNCATED)
	DropBadSRH      = DropReason(proxyTCProxyDropReasonPROXY_DROP_BAD_SRH)
	DropBadExt      = DropReason(proxyTCProxyDropReasonPROXY_DROP_BAD_EXT)
	DropNoSRH       = DropReason(proxyTCProxyDropReasonPROXY_DROP_NO_SRH)
	DropSLZero      = DropReason(proxyTCProxyDropReasonPROXY_DROP_SL_ZERO)
	DropInnerType   = DropReason(proxyTCProxyDropReasonPROXY_DROP_INNER_TYPE)
	DropFragment    = DropReason(proxyTCProxyDropReasonPROXY_DROP_FRAGMENT)
	DropHopLimit    = DropReason(proxyTCProxyDropReasonPROXY_DROP_HOP_LIMIT)
	DropHdrTooLong  = DropReason(proxyTCProxyDropReasonPROXY_DROP_HDR_TOO_LONG)
	DropAdjustRoom  = DropReason(proxyTCProxyDropReasonPROXY_DROP_ADJUST_ROOM)
	DropCacheEmpty  = DropReason(proxyTCProxyDropReasonPROXY_DROP_CACHE_EMPTY)
	DropFlowMiss    = DropReason(proxyTCProxyDropReasonPROXY_DROP_FLOW_MISS)
	DropFlowExpired = DropReason(proxyTCProxyDropReasonPROXY_DROP_FLOW_EXPIRED)
	DropFlowFull    = DropReason(proxyTCProxyDropReasonPROXY_DROP_FLOW_FULL)
	DropMTU         = DropReason(proxyTCProxyDropReasonPROXY_DROP_MTU)
	DropTooBig      = DropReason(proxyTCProxyDropReasonPROXY_DROP_TOO_BIG)
	DropInternal    = DropReason(proxyTCProxyDropReasonPROXY_DROP_INTERNAL)
	DropGSOL2       = DropReason(proxyTCProxyDropReasonPROXY_DROP_GSO_L2)
	DropNoFIB       = DropReason(proxyTCProxyDropReasonPROXY_DROP_NO_FIB)
	numDropReasons  = int(proxyTCProxyDropReasonPROXY_DROP_MAX)
)

var dropNames = [...]string{
	DropTruncated:   "truncated",
	DropBadSRH:      "bad-srh",
	DropBadExt:      "bad-ext-headers",
	DropNoSRH:       "no-srh",
	DropSLZero:      "sl-zero",
	DropInnerType:   "inner-type",
	DropFragment:    "fragment",
	DropHopLimit:    "hop-limit",
	DropHdrTooLong:  "header-too-long",
	DropAdjustRoom:  "adjust-room",
	DropCacheEmpty:  "cache-empty",
	DropFlowMiss:    "flow-miss",
	DropFlowExpired: "flow-expired",
	DropFlowFull:    "flow-full",
	DropMTU:         "mtu",
	DropTooBig:      "too-big",
	DropInternal:    "internal",
	DropGSOL2:       "gso-ethernet",
	DropNoFIB:       "no-fib",
}

// String is the reason's name as counters and JSON show it.
func (r DropReason) String() string {
	if int(r) < len(dropNames) && dropNames[r] != "" {
		return dropNames[r]
	}
	return "unknown"
}
