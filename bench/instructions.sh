#!/bin/bash
# Instructions per request of the request path (bench/micro.py: parse, environ, WSGI call,
# head, write, over a fake transport), counted by callgrind: repeatable, unlike timings on a
# shared machine. Two runs of different lengths; the difference divided by the difference
# in requests takes start-up out.
#
#   bench/instructions.sh [compiled] [python] [llhttp]   (default: compiled python)
#
# compiled: the compiled core; python: CORRAL_NO_EXTENSIONS=1; llhttp: the compiled build
# with the llhttp parser corral had before its own (tests/llhttp_oracle.py).
# MICRO_ARGS: more arguments for bench/micro.py (--forwarded: the listener the command line
# makes, with Gunicorn's forwarded_allow_ips; --close: a new connection per request).
# Needs valgrind (apt-get install valgrind).
set -euo pipefail
# string hashes decide dict probes: a fixed seed makes counts repeat (random: +-300)
export PYTHONHASHSEED=0
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
count() {
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
for core in "${@:-compiled python}"; do
    for mode in $core; do
        extra=()
        unset CORRAL_NO_EXTENSIONS
        case $mode in
            compiled) ;;
            python) export CORRAL_NO_EXTENSIONS=1 ;;
            llhttp) extra=(--llhttp) ;;
            *) echo "unknown core: $mode" >&2; exit 2 ;;
        esac
        short=$(count "$python" bench/micro.py --once -n 2000 "${extra[@]}" ${MICRO_ARGS:-})
        long=$(count "$python" bench/micro.py --once -n 12000 "${extra[@]}" ${MICRO_ARGS:-})
        echo "$mode: $(( (long - short) / 10000 )) instructions per request"
    done
done
