#!/usr/bin/env bash
# What travels to a lent GPU machine. Each call sends this checkout's tracked files and the untracked ones git does not
# ignore, with the paths the call carries, at most 64 MiB in all; the shipped weights alone are 127 MiB, and a
# CIFAR-10 chunk of ../shared/tools/cifar_chunks.sh up to 50 MiB. Training, its tests and its benchmarks read none of
# weights/, so it stays here while a GPU is lent (docs/training.md, "On a lent GPU"):
#
#   bash scripts/device_tree.sh leave     # before the first call: weights/ out of the index, ignored here, and
#                                         # .device-data/ ignored (the CIFAR-10 chunks calls carry)
#   bash scripts/device_tree.sh restore   # after the last call: weights/ tracked again, as it was
#   bash scripts/device_tree.sh size      # MiB that would travel now, before what a call carries
#
# While weights/ is left out, a commit is refused (a pre-commit hook), since it would delete the weights. The files
# themselves never move: only git's index and .git/info/exclude change, and restore puts both back.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
git_dir=$(git rev-parse --git-dir)
exclude="$git_dir/info/exclude" hook="$git_dir/hooks/pre-commit"
mark="# scripts/device_tree.sh: weights/ left here while a GPU is lent"

travelling_mib() {
    { git ls-files -z; git ls-files -z --others --exclude-standard; } |
        xargs -0 -r stat -c %s -- 2>/dev/null | awk '{ s += $1 } END { printf "%.1f\n", s / 1048576 }'
}

case "${1:-}" in
leave)
    if grep -qxF "$mark" "$exclude" 2>/dev/null; then echo "weights/ is already left out"; exit 0; fi
    if ! git diff --cached --quiet; then echo "commit or unstage your staged changes first" >&2; exit 1; fi
    if [ -e "$hook" ]; then echo "$hook exists already: this script would replace it" >&2; exit 1; fi
    git rm -r -q --cached weights
    mkdir -p "$(dirname "$exclude")" "$(dirname "$hook")"
    printf '%s\n/weights/\n/.device-data/\n' "$mark" >>"$exclude"  # and the CIFAR-10 chunks calls carry
    printf '#!/bin/sh\necho "weights/ is left out of the index for a GPU machine: bash scripts/device_tree.sh restore, then commit" >&2\nexit 1\n' >"$hook"
    chmod +x "$hook"
    echo "weights/ left out; $(travelling_mib) MiB travel, before what a call carries (at most 64 MiB in all)"
    ;;
restore)
    if ! grep -qxF "$mark" "$exclude" 2>/dev/null; then echo "weights/ was not left out"; exit 0; fi
    git reset -q -- weights
    # (sed -i would follow no link; the exclude file is a plain file of this checkout)
    grep -vxF -e "$mark" -e "/weights/" -e "/.device-data/" "$exclude" >"$exclude.tmp" || true
    mv "$exclude.tmp" "$exclude"
    rm -f "$hook"
    if [ -n "$(git status --porcelain -- weights)" ]; then
        echo "weights/ differs from the last commit:" >&2
        git status --short -- weights >&2
        exit 1
    fi
    echo "weights/ tracked again, as in the last commit"
    ;;
size)
    echo "$(travelling_mib) MiB travel, before what a call carries (at most 64 MiB in all)"
    ;;
*)
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit 2
    ;;
esac
