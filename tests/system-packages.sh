#!/bin/bash
# The Debian packages the test suite runs besides Python's (README.md's second command, and
# .ci/run): each is installed only when missing, so that a machine that has them is not touched.
set -euo pipefail
missing=()
# venv and pip for the test virtualenv; the compiled core: a C compiler and the Python headers
python3 -c "import ensurepip, venv" 2>/dev/null || missing+=(python3-venv)
command -v gcc >/dev/null || missing+=(gcc)
[ -f "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ] \
  || missing+=(python3-dev)
# a real nginx in front of corral (tests/integration/test_nginx_uwsgi.py: uwsgi_pass)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
# a real HAProxy balancing over corral instances (tests/integration/test_rolling.py)
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
# the programs the external applications' tests supervise (tests/integration/external/)
[ -x /usr/bin/python3.11 ] || missing+=(python3.11)
# a real php-fpm behind corral's "php" applications (tests/integration/test_php.py)
compgen -G '/usr/sbin/php-fpm*' >/dev/null || missing+=(php-fpm)
# the other languages' servers and toolchains (tests/integration/test_languages.py)
command -v starman >/dev/null || missing+=(starman)
command -v puma >/dev/null || missing+=(puma)
command -v go >/dev/null || missing+=(golang-go)
command -v node >/dev/null || missing+=(nodejs)
command -v javac >/dev/null || missing+=(default-jdk-headless)
[ -f /usr/share/jetty9/start.jar ] || missing+=(jetty9)
compgen -G '/usr/share/java/servlet-api*.jar' >/dev/null || missing+=(libservlet-api-java)
if [ "${#missing[@]}" -gt 0 ]; then
  as_root=()
  [ "$(id -u)" -eq 0 ] || as_root=(sudo)
  "${as_root[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y --no-install-recommends \
    "${missing[@]}"
fi
