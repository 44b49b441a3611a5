#!/usr/bin/env bash
# Debian's packages that make's targets need, each installed unless its command is already on the PATH:
#
#   scripts/apt_install.sh COMMAND:PACKAGE ...
#
# What is missing goes in one `apt-get install`; the package lists are fetched at most once an hour
# (.build/apt-updated), so the targets of one `make` share one `apt-get update`, and two targets running at
# once (make -j) wait for each other's lock instead of failing. We run as root.
set -euo pipefail
missing=()
for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
APT=(apt-get -q -o DPkg::Lock::Timeout=600)
STAMP=.build/apt-updated
mkdir -p .build
if [ -z "$(find "$STAMP" -mmin -60 2>/dev/null)" ]; then
    "${APT[@]}" update
    touch "$STAMP"
fi
DEBIAN_FRONTEND=noninteractive "${APT[@]}" install -y "${missing[@]}"
