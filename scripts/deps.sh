#!/usr/bin/env bash
# Installs what segchain needs to build, test and run on Debian 12, skipping
# what is already there. Idempotent; run as root.
set -euo pipefail

APT_PKGS=(clang llvm libbpf-dev bpftool iproute2 nftables iptables tcpdump tshark
          python3 python3-scapy ethtool iputils-ping curl nginx-light haproxy jq
          protobuf-compiler prometheus frr chromium-headless-shell)

missing=()
for p in "${APT_PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Suricata 7, the oracle of the SR-IDS's differential test (internal/ids,
# TestSuricataDifferential): bookworm has 6.0, bookworm-backports has 7.
# The backports source is added for that package alone (apt installs from
# backports only what is asked for with -t).
if ! suricata -V 2>/dev/null | grep -q 'version 7\.'; then
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	if [ "$codename" = bookworm ]; then
		src=/etc/apt/sources.list.d/bookworm-backports.sources
		if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
			printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm-backports' \
				'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' >"$src"
		fi
		echo "deps: installing suricata 7 from bookworm-backports"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends -t bookworm-backports suricata >/dev/null
	else
		echo "deps: installing suricata"
		export DEBIAN_FRONTEND=noninteractive
		apt-get install -y -qq --no-install-recommends suricata >/dev/null
	fi
fi

# Debian's python3-scapy serves /usr/bin/python3; another python3 first in
# PATH (pyenv, venv) needs scapy from PyPI.
if ! python3 -c 'import scapy.all' >/dev/null 2>&1; then
	echo "deps: installing scapy for $(command -v python3)"
	python3 -m pip install --quiet scapy
fi

if ! command -v go >/dev/null 2>&1; then
	echo "deps: Go is required (go.mod names the version)" >&2
	exit 1
fi
go mod download

# The protoc plugins of make generate (proto/ -> internal/agent/rpc/agentpb),
# pinned: the generated code names their versions.
GOBIN_DIR="$(go env GOPATH)/bin"
want_plugin() { # name module@version version-string
	"$GOBIN_DIR/$1" --version 2>/dev/null | grep -qF "$3" || {
		echo "deps: installing $2"
		GOBIN="$GOBIN_DIR" go install "$2"
	}
}
want_plugin protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.6 v1.36.6
want_plugin protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1 1.5.1
