#!/usr/bin/env bash
# Prepare the benchmark machine: load tools from apt, and one virtualenv
# (bench/.venv) holding corral and every Python peer, so that all Python
# servers run on the same interpreter. Safe to run again: every step is
# idempotent.
#
#   bash bench/setup.sh
#
# Environment:
#   PYTHON        interpreter used to create the venv (default: python3)
#   SKIP_APT=1    do not touch apt (tools already installed)
#   BENCH_CORRAL  the corral checkout to install, editable (default: this one, the
#                 directory above bench/): another worktree's corral measured by this
#                 checkout's bench/run.py; run setup.sh again without it to come back
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(dirname "$BENCH_DIR")"
VENV="$BENCH_DIR/.venv"
PYTHON="${PYTHON:-python3}"
CORRAL_DIR="$(cd "${BENCH_CORRAL:-$REPO_DIR}" && pwd)"

log() { printf '==> %s\n' "$*"; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

wait_for_apt() {
    # apt-get update may already be running in the background: wait for it.
    local deadline=$((SECONDS + 600))
    while pgrep -x apt-get >/dev/null || pgrep -x dpkg >/dev/null || pgrep -x apt >/dev/null; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "setup.sh: apt is still busy after 600 s, giving up" >&2
            exit 1
        fi
        sleep 2
    done
}

install_apt() {
    local pkgs=(wrk apache2-utils nginx-light libev-dev)
    local missing=()
    command -v wrk >/dev/null || missing+=(wrk)
    command -v ab >/dev/null || missing+=(apache2-utils)
    command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
    command -v taskset >/dev/null || missing+=(util-linux)
    # bjoern builds from source against libev.
    [ -f /usr/include/ev.h ] || missing+=(libev-dev)
    if [ "${#missing[@]}" -eq 0 ]; then
        log "apt tools present: ${pkgs[*]}"
        return
    fi
    log "apt-get install ${missing[*]}"
    wait_for_apt
    export DEBIAN_FRONTEND=noninteractive
    if ! as_root apt-get install -y --no-install-recommends "${missing[@]}"; then
        wait_for_apt
        as_root apt-get update
        # nginx-light may be gone from newer releases: fall back to nginx.
        as_root apt-get install -y --no-install-recommends "${missing[@]}" \
            || as_root apt-get install -y --no-install-recommends \
                "${missing[@]/nginx-light/nginx}"
    fi
    # The Debian package starts a system nginx on port 80: the benchmark runs
    # its own instance, so stop the system one to keep the machine quiet.
    if command -v systemctl >/dev/null && systemctl is-active --quiet nginx 2>/dev/null; then
        as_root systemctl stop nginx || true
    elif [ -f /run/nginx.pid ]; then
        as_root nginx -s quit 2>/dev/null || true
    fi
}

install_venv() {
    if [ ! -x "$VENV/bin/python" ]; then
        log "creating $VENV with $("$PYTHON" --version 2>&1)"
        "$PYTHON" -m venv "$VENV"
    else
        log "venv present: $VENV"
    fi
    local pip=("$VENV/bin/python" -m pip --disable-pip-version-check)
    # Cython: bench/revisions.py builds the compiled core of the revision it compares with
    "${pip[@]}" install --quiet --upgrade pip wheel setuptools Cython
    log "installing peers"
    # uwsgi and bjoern build from source (a C compiler and Python headers;
    # bjoern also libev's, from apt).
    "${pip[@]}" install --quiet --upgrade \
        gunicorn uwsgi granian waitress bjoern uvicorn hypercorn matplotlib \
        django djangorestframework fastapi starlette whitenoise \
        uvloop httptools
    log "installing corral (editable) from $CORRAL_DIR"
    # with its compression extra (isal, brotli, backports.zstd): the codecs of
    # settings.http.compression; bench/compressors.py also measures the libraries not chosen
    "${pip[@]}" install --quiet -e "$CORRAL_DIR[compression]" zlib-ng brotlicffi zstandard
}

if [ "${SKIP_APT:-0}" != 1 ]; then
    install_apt
fi
install_venv
mkdir -p "$BENCH_DIR/out"
log "done; run: $VENV/bin/python $BENCH_DIR/run.py"
