#!/usr/bin/env bash
# apt_install.sh LABEL PKG... — install those of the Debian packages PKG...
# that are missing, with apt-get (as root, or through non-interactive sudo);
# nothing at all when every one is installed.  LABEL prefixes the messages.
# Never reads stdin: CI runs without one.  Used by setup.sh and fuzz.sh.
set -euo pipefail
label=$1
shift
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]})) || exit 0
echo "$label: installing ${missing[*]}" >&2
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "$label: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)  # asks for a password on a terminal; fails clearly without one
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq </dev/null
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
