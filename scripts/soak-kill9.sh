#!/usr/bin/env bash
# soak-kill9.sh — kill -9 apply and destroy at random moments, then check
# that the next command leaves exactly the state a clean one does.
#
# Root. Creates its own lab (k9-<random>, or --lab NAME; the default
# domain: native chains, a proxy on nfv1, a firewall on nfv2) and removes
# it on exit.
#
#   apply phase   RUNS times: start from a destroyed lab, start `apply`,
#                 SIGKILL it after a random delay (0 .. the time a full
#                 apply takes), run `apply` again and compare a snapshot of
#                 the lab with the snapshot of a clean apply.
#   destroy phase RUNS times: start from an applied lab, SIGKILL `destroy`
#                 at a random moment, run `destroy` again and compare with
#                 the snapshot of a clean lab (never applied).
#   apply+destroy RUNS times: SIGKILL `apply` as in the apply phase, then
#                 run `destroy`: the lab must be clean again.
#
# A snapshot holds, per node namespace: routes and rules (IPv4 and IPv6, all
# tables), seg6 HMAC keys and tunsrc, the seg6/forwarding sysctls, the TCX
# attachments (bpftool net, ids masked), segchain's pins under bpffs with
# each map's type/key/value/max entries and the contents of the proxy and
# firewall SID maps, and segchain's state files (/run/segchain/nodes, fw,
# journal). Lock files (/run/segchain/locks) are not state. Mismatches are
# printed as diffs and counted.
#
# Usage: sudo scripts/soak-kill9.sh [--lab NAME] [RUNS]      (default 50)
#   --lab NAME  the lab to create (it must not exist; default k9-<random>)
# env: SEGCHAIN_BIN=path to a built binary ($SEGCHAIN also works; default:
#      bin/segchain, built only when older than the sources:
#      scripts/segchain-bin.sh); KEEP=1 keeps the work dir.
set -euo pipefail

LAB=k9-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
while [ $# -gt 0 ]; do
	case $1 in
	--lab) LAB=${2:?--lab needs a name}; shift 2 ;;
	--lab=*) LAB=${1#--lab=}; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
	-*) echo "soak-kill9: unknown option $1 (--help)" >&2; exit 2 ;;
	*) break ;;
	esac
done
RUNS=${1:-50}
[ "$(id -u)" = 0 ] || { echo "soak-kill9: run as root" >&2; exit 1; }
cd "$(dirname "$0")/.."
WORK=$(mktemp -d /tmp/soak-kill9.XXXXXX)
DOMAIN=examples/default.yaml
. scripts/segchain-bin.sh
segchain_bin

cleanup() {
	"$BIN" destroy -f "$DOMAIN" --lab "$LAB" >/dev/null 2>&1 || true
	"$BIN" lab down --lab "$LAB" >/dev/null 2>&1 || true
	[ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

sc() { "$BIN" "$1" -f "$DOMAIN" --lab "$LAB" "${@:2}"; }

nsdirs() { # bpffs and /run directories of namespace $1 (ns-<inode>-<cookie>)
	local ino
	ino=$(stat -L -c %i "/run/netns/$1")
	ls -d /sys/fs/bpf/segchain/ns-"$ino"-* /run/segchain/fw/ns-"$ino"-* /run/segchain/journal/ns-"$ino"-* 2>/dev/null || true
}

snapshot() { # the lab's state, normalised (object ids masked)
	local ns d f
	for ns in $(ls /run/netns | grep "^sc-$LAB-" | sort); do
		echo "=== $ns"
		for fam in -4 -6; do
			ip -n "$ns" $fam route show table all | grep -v -e '^local fe80' -e '^fe80::/64' -e '^multicast' || true
			ip -n "$ns" $fam rule show
		done
		ip -n "$ns" sr hmac show 2>/dev/null || true
		ip -n "$ns" sr tunsrc show 2>/dev/null || true
		ip netns exec "$ns" sysctl -a 2>/dev/null | grep -E 'seg6_(enabled|require_hmac)|\.forwarding =' | sort
		ip netns exec "$ns" bpftool net show 2>/dev/null | sed -E 's/(prog_id|link_id|id) [0-9]+/\1 N/g'
		for d in $(nsdirs "$ns"); do
			echo "--- ${d%%/ns-*}/$(basename "$d" | sed -E 's/^ns-[0-9]+-[0-9]+/NS/')"
			find "$d" -mindepth 1 -printf '%P\n' | sort
			for f in $(find "$d" -mindepth 1 -type f | sort); do
				case "$d" in
				/sys/fs/bpf/*)
					case "$(basename "$f")" in tcx-*) continue ;; esac
					echo "map $(basename "$f"): $(bpftool -j map show pinned "$f" | jq -c '{type, name, bytes_key, bytes_value, max_entries}')"
					case "$(basename "$f")" in sids_map | ifaces_map | fw_sids | fw_args)
						bpftool -j map dump pinned "$f" | jq -S -c 'sort_by(.key | tostring)[]' ;;
					esac
					;;
				*) echo "file $(basename "$f"):"; cat "$f"; echo ;;
				esac
			done
		done
		f=/run/segchain/nodes/$ns.json
		if [ -e "$f" ]; then echo "--- $f"; cat "$f"; echo; fi
	done
	return 0
}

# A lab of that name is someone else's: cleanup must not take it down.
if [ -e "/run/segchain/labs/$LAB.json" ]; then
	echo "soak-kill9: lab $LAB exists; name another with --lab" >&2
	trap - EXIT
	rm -rf "$WORK"
	exit 2
fi
"$BIN" lab up -f "$DOMAIN" --lab "$LAB" >/dev/null
snapshot >"$WORK/clean-lab"
t0=$(date +%s%N)
sc apply >/dev/null
t1=$(date +%s%N)
snapshot >"$WORK/clean-apply"
sc destroy >/dev/null
snapshot >"$WORK/after-destroy"
if ! diff -q "$WORK/clean-lab" "$WORK/after-destroy" >/dev/null; then
	echo "soak-kill9: a clean destroy does not restore the clean lab:"
	diff "$WORK/clean-lab" "$WORK/after-destroy" | head -40 || true
fi
APPLY_NS=$(( (t1 - t0) ))
echo "lab $LAB; a clean apply takes $((APPLY_NS / 1000000)) ms; $RUNS runs per phase"

rand_delay() { # a random delay in [0, APPLY_NS] as seconds for sleep
	local r=$(( (RANDOM * 32768 + RANDOM) % (APPLY_NS + 1) ))
	printf '%d.%09d' $((r / 1000000000)) $((r % 1000000000))
}

# killrun VERB: start segchain VERB, SIGKILL it after a random delay;
# prints "killed" or "finished" (the command ended before the signal).
killrun() {
	# The binary itself, not the sc function: killing a function's
	# subshell would leave segchain running.
	"$BIN" "$1" -f "$DOMAIN" --lab "$LAB" >"$WORK/killed.out" 2>&1 &
	local pid=$!
	sleep "$(rand_delay)"
	if kill -9 "$pid" 2>/dev/null; then
		wait "$pid" 2>/dev/null || true
		echo killed
	else
		wait "$pid" 2>/dev/null || true
		echo finished
	fi
}

phase() { # phase KILLED PREPARE VERB WANT: prepare, kill KILLED, run VERB
	local kverb=$1 prepare=$2 verb=$3 want=$4 i killed=0 bad=0 recovered=0 failed=0
	for i in $(seq 1 "$RUNS"); do
		sc "$prepare" >/dev/null 2>&1 || sc "$prepare" >/dev/null
		[ "$(killrun "$kverb")" = killed ] && killed=$((killed + 1))
		if ! sc "$verb" >"$WORK/next.out" 2>&1; then
			failed=$((failed + 1))
			echo "run $i: segchain $verb after killing $kverb failed:"; sed 's/^/  /' "$WORK/next.out"
		fi
		grep -q '^recovery:' "$WORK/next.out" && recovered=$((recovered + 1))
		snapshot >"$WORK/got"
		if ! diff -q "$WORK/$want" "$WORK/got" >/dev/null; then
			bad=$((bad + 1))
			echo "run $i: state after killed $kverb + $verb differs from $want:"
			diff "$WORK/$want" "$WORK/got" | head -30 | sed 's/^/  /' || true
		fi
	done
	echo "kill $kverb, then $verb: $RUNS runs, $killed killed mid-way, $recovered found an unfinished journal, $failed re-runs failed, $bad mismatches with $want"
	TOTAL_BAD=$((TOTAL_BAD + bad + failed))
}

TOTAL_BAD=0
phase apply destroy apply clean-apply
phase destroy apply destroy clean-lab
phase apply destroy destroy clean-lab
[ "$TOTAL_BAD" = 0 ] && echo "soak-kill9: ok" || { echo "soak-kill9: $TOTAL_BAD bad runs"; exit 1; }
