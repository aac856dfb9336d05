#!/usr/bin/env bash
# The calls of a GPU loan, one verb a call (docs/training.md, "On a lent GPU"). Each runs from the repository root on
# the GPU machine; between calls, while the machine stays warm, /tmp and the ignored runs/ stay there. It stays warm
# only 30 s after a call returns, so a run's results come back with every call that waits on it.
#
#   bash scripts/gpu_loan.sh unpack N          # CIFAR-10 chunk N (carried: .device-data/cN) into $DATA; after the
#                                              # last, checks 50,000 training and 10,000 test images are there
#   bash scripts/gpu_loan.sh start NAME ARGS   # python3 train.py ARGS --data-dir $DATA --out runs/NAME
#                                              # --checkpoint-dir runs/NAME-checkpoint --no-progress, in its own
#                                              # session so that it outlives the call; its log: runs/NAME.log
#   bash scripts/gpu_loan.sh then FIRST NAME ARGS  # the same, started as soon as run FIRST has ended well (it wrote
#                                              # runs/FIRST/model.safetensors): pretraining, then fine-tuning from it
#                                              # with no call in between
#   bash scripts/gpu_loan.sh wait NAME SECONDS # the log's tail every 30 s, until the run ends or SECONDS pass; then,
#                                              # with $OUT set, collects it
#   bash scripts/gpu_loan.sh collect NAME      # runs/NAME, its log and, while it runs, its checkpoint (for --resume
#                                              # on a later loan) into $OUT, as parts of at most 15 MB
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

# runs/NAME, its log and, while it runs, its checkpoint into $OUT, as parts of at most 15 MB.
collect() {
    local name="$1" out="${OUT:?collect writes into OUT, the folder whose files come back from the call}" status=0
    local parts=("$name.log")
    [ -d "runs/$name" ] && parts+=("$name")
    running "$name" && [ -d "runs/$name-checkpoint" ] && parts+=("$name-checkpoint")
    # while the run writes, tar may find a file changed (status 1); files are replaced whole, never torn
    tar cf "$out/$name.tar" --exclude='.*.tmp' --warning=no-file-changed --warning=no-file-removed -C runs \
        "${parts[@]}" || status=$?
    [ "$status" -le 1 ] || exit "$status"
    split -b 15000000 -d "$out/$name.tar" "$out/$name.tar.part-"
    rm "$out/$name.tar"
    echo "collected ${parts[*]}:"
    ls -l "$out"
}

case "$verb" in
unpack)
    mkdir -p "$DATA"
    tar xzf ".device-data/c$1/data.tar.gz" -C "$DATA"
    train=$(find "$DATA/cifar10/train" -name '*.png' | wc -l)
    test=$(find "$DATA/cifar10/test" -name '*.png' | wc -l)
    echo "chunk $1 unpacked: $train training and $test test images in $DATA/cifar10"
    ;;
start | then)
    first=""
    if [ "$verb" = then ]; then
        first="$1"
        shift
        [ -f "runs/$first.pid" ] || { echo "no run $first was started here" >&2; exit 1; }
    fi
    name="$1"
    shift
    mkdir -p runs
    # shellcheck disable=SC2016  # expanded by the inner shell, which outlives this call
    setsid nohup bash -c '
        first="$1" name="$2" python="$3" data="$4"
        shift 4
        if [ -n "$first" ]; then
            while kill -0 "$(cat "runs/$first.pid")" 2>/dev/null; do sleep 2; done
            [ -f "runs/$first/model.safetensors" ] || { echo "$first did not end well: $name not started"; exit 1; }
            echo "$first has ended: starting $name"
        fi
        exec "$python" train.py "$@" --data-dir "$data" --out "runs/$name" --checkpoint-dir "runs/$name-checkpoint" \
            --no-progress' _ "$first" "$name" "$PYTHON" "$DATA" "$@" >"runs/$name.log" 2>&1 </dev/null &
    echo $! >"runs/$name.pid"
    sleep "${FIRST_LOOK_S:-20}"  # then the log's first lines say whether it got going
    echo "started $name (process $(cat "runs/$name.pid"))${first:+, after $first}:"
    log_tail "$name" 20
    ;;
wait)
    name="$1" until=$((SECONDS + $2)) shown=$SECONDS
    while running "$name" && [ $SECONDS -lt "$until" ]; do  # ends within a second of the run
        sleep 1
        if [ $((SECONDS - shown)) -ge 30 ]; then
            shown=$SECONDS
            echo "--- $((SECONDS / 60)) min"
            log_tail "$name" 3
        fi
    done
    if running "$name"; then echo "$name is still running"; else echo "$name has ended:"; log_tail "$name" 20; fi
    if [ -n "${OUT:-}" ]; then collect "$name"; fi
    ;;
collect)
    collect "$1"
    ;;
join)
    mkdir -p "$3"
    cat "$1/$2".tar.part-* | tar xf - -C "$3"
    ls -l "$3"
    ;;
*)
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit 2
    ;;
esac
