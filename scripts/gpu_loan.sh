#!/usr/bin/env bash
# The calls of a GPU loan, one verb a call (docs/training.md, "On a lent GPU"). Each runs from the repository root on
# the GPU machine; between calls, while the machine stays warm, /tmp and the ignored runs/ stay there.
#
#   bash scripts/gpu_loan.sh unpack N          # CIFAR-10 chunk N (carried: .device-data/cN) into $DATA; after the
#                                              # last, checks 50,000 training and 10,000 test images are there
#   bash scripts/gpu_loan.sh start NAME ARGS   # python3 train.py ARGS --data-dir $DATA --out runs/NAME
#                                              # --checkpoint-dir runs/NAME-checkpoint --no-progress, in its own
#                                              # session so that it outlives the call; its log: runs/NAME.log
#   bash scripts/gpu_loan.sh wait NAME SECONDS # the log's tail every 30 s, until the run ends or SECONDS pass
#   bash scripts/gpu_loan.sh collect NAME      # runs/NAME and its log into $OUT, as parts of at most 15 MB
#
# And here, once the call's files are back: bash scripts/gpu_loan.sh join FOLDER NAME DEST (FOLDER: the call's
# files) puts runs/NAME and its log back together in DEST.
set -euo pipefail
DATA="${DATA:-/tmp/shared/data}"
PYTHON="${PYTHON:-python3}"
verb="${1:-}"
[ $# -gt 0 ] && shift

log_tail() { tail -n "${2:-5}" "runs/$1.log" 2>/dev/null || true; }
running() { [ -f "runs/$1.pid" ] && kill -0 "$(cat "runs/$1.pid")" 2>/dev/null; }

case "$verb" in
unpack)
    mkdir -p "$DATA"
    tar xzf ".device-data/c$1/data.tar.gz" -C "$DATA"
    train=$(find "$DATA/cifar10/train" -name '*.png' | wc -l)
    test=$(find "$DATA/cifar10/test" -name '*.png' | wc -l)
    echo "chunk $1 unpacked: $train training and $test test images in $DATA/cifar10"
    ;;
start)
    name="$1"
    shift
    mkdir -p runs
    setsid nohup "$PYTHON" train.py "$@" --data-dir "$DATA" --out "runs/$name" --checkpoint-dir "runs/$name-checkpoint" \
        --no-progress >"runs/$name.log" 2>&1 </dev/null &
    echo $! >"runs/$name.pid"
    sleep 20
    echo "started $name (process $(cat "runs/$name.pid")):"
    log_tail "$name" 20
    ;;
wait)
    name="$1" until=$((SECONDS + $2))
    while running "$name" && [ $SECONDS -lt "$until" ]; do
        sleep 30
        echo "--- $((SECONDS / 60)) min"
        log_tail "$name" 3
    done
    if running "$name"; then echo "$name is still running"; else echo "$name has ended:"; log_tail "$name" 20; fi
    ;;
collect)
    name="$1"
    out="${OUT:?collect writes into OUT, the folder whose files come back from the call}"
    tar cf - -C runs "$name" "$name.log" | split -b 15000000 -d - "$out/$name.tar.part-"
    ls -l "$out"
    ;;
join)
    mkdir -p "$3"
    cat "$1/$2".tar.part-* | tar xf - -C "$3"
    ls -l "$3/$2"
    ;;
*)
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit 2
    ;;
esac
