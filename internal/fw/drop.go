package fw

// DropReason is why the firewall program dropped a packet (the index of
// the per-instance drop counters).
type DropReason uint32

// Drop reasons, generated from enum fw_drop_reason.
const (
	DropTruncated  = DropReason(fwTCFwDropReasonFW_DROP_TRUNCATED)
	DropBadSRH     = DropReason(fwTCFwDropReasonFW_DROP_BAD_SRH)
	DropBadExt     = DropReason(fwTCFwDropReasonFW_DROP_BAD_EXT)
	DropFragment   = DropReason(fwTCFwDropReasonFW_DROP_FRAGMENT)
	DropBadInner   = DropReason(fwTCFwDropReasonFW_DROP_BAD_INNER)
	DropHopLimit   = DropReason(fwTCFwDropReasonFW_DROP_HOP_LIMIT)
	DropRule       = DropReason(fwTCFwDropReasonFW_DROP_RULE)
	DropReject     = DropReason(fwTCFwDropReasonFW_DROP_REJECT)
	DropPolicy     = DropReason(fwTCFwDropReasonFW_DROP_POLICY)
	DropArgs       = DropReason(fwTCFwDropReasonFW_DROP_ARGS)
	DropInternal   = DropReason(fwTCFwDropReasonFW_DROP_INTERNAL)
	numDropReasons = int(fwTCFwDropReasonFW_DROP_MAX)
)

var dropNames = [...]string{
	DropTruncated: "truncated",
	DropBadSRH:    "bad-srh",
	DropBadExt:    "too-many-ext-hdrs",
	DropFragment:  "fragment",
	DropBadInner:  "bad-inner",
	DropHopLimit:  "hop-limit",
	DropRule:      "rule",
	DropReject:    "reject",
	DropPolicy:    "policy",
	DropArgs:      "unknown-args",
	DropInternal:  "internal",
}

// String is the reason's name as counters and JSON show it.
func (r DropReason) String() string {
	if int(r) < len(dropNames) && dropNames[r] != "" {
		return dropNames[r]
	}
	return "unknown"
}
