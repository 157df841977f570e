# segchain-bin.sh — sourced by the scripts that run segchain: sets BIN.
#
# $SEGCHAIN_BIN names the binary to run, as the Go tests take it
# (testutil.MainWithBinary); $SEGCHAIN, the name some scripts used before,
# still works. Without either, BIN is `make build`'s bin/segchain, built
# only when it is missing or older than a Go source, go.mod/go.sum or an
# eBPF object: a script run twice does not link segchain twice.
segchain_bin() {
	local root
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	BIN=${SEGCHAIN_BIN:-${SEGCHAIN:-}}
	if [ -n "$BIN" ]; then
		[ -x "$BIN" ] || { echo "$0: SEGCHAIN_BIN=$BIN is not an executable" >&2; exit 2; }
		return 0
	fi
	BIN=$root/bin/segchain
	if [ -x "$BIN" ] && [ -z "$(cd "$root" && find cmd internal bpf examples go.mod go.sum \
		\( -name '*.go' -o -name '*.o' -o -name '*.yaml' -o -name 'go.*' \) -newer "$BIN" -print -quit 2>/dev/null)" ]; then
		return 0
	fi
	echo "$0: building $BIN (set SEGCHAIN_BIN to use another binary)" >&2
	make -s -C "$root" build >&2
}
