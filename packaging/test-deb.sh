#!/bin/bash
# Installs the Debian package on this machine, runs the installed unit's
# ExecStartPre and ExecStart lines by hand (as systemd would, as the
# mithril user, with NOTIFY_SOCKET) against a throwaway one-node Redis
# Cluster, checks that the proxy serves, stops it, then removes and purges
# the package, checking what each step leaves behind.
#
#   packaging/test-deb.sh [path/to/mithril_VERSION_ARCH.deb]
#
# Needs root, dpkg, redis-server, redis-cli and python3 (for the
# notification socket). Not part of `make test`: it changes the machine
# (a package, a system user) for the duration of the run. It refuses to
# run when a mithril package is already installed.
set -euo pipefail

cd "$(dirname "$0")/.."
DEB=${1:-$(ls -t target/deb/mithril_*.deb 2>/dev/null | head -n 1 || true)}
[ -n "$DEB" ] && [ -f "$DEB" ] || { echo "no .deb given or found; run 'make deb' first" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run as root (dpkg -i)" >&2; exit 2; }
if dpkg-query -W -f='${Status}' mithril 2>/dev/null | grep -q "install ok"; then
    echo "a mithril package is already installed; not touching it" >&2
    exit 2
fi

WORK=$(mktemp -d /tmp/mithril-deb-test.XXXXXX)
chmod 0755 "$WORK"
FAILED=0
REDIS_PORT=""
PROXY_PID=""
NOTIFY_PID=""

pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILED=1; }
check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@" >/dev/null 2>&1; then pass "$what"; else fail "$what"; fi
}

cleanup() {
    [ -n "$PROXY_PID" ] && kill -KILL "$PROXY_PID" 2>/dev/null || true
    [ -n "$NOTIFY_PID" ] && kill "$NOTIFY_PID" 2>/dev/null || true
    [ -n "$REDIS_PORT" ] && redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
    if dpkg-query -W -f='${Status}' mithril 2>/dev/null | grep -q "ok"; then
        dpkg --purge mithril >/dev/null 2>&1 || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { # a TCP port with nothing listening on it (nor on port+10000)
    local p
    for p in $(shuf -i 23000-29000 -n 200); do
        if [ -z "$(ss -Hltn "sport = :$p or sport = :$((p + 10000))")" ]; then
            echo "$p"; return 0
        fi
    done
    return 1
}

echo "== package: $DEB"
dpkg-deb -f "$DEB" Package Version Architecture Depends

echo "== a one-node Redis Cluster"
mkdir -p "$WORK/redis"
for attempt in 1 2 3; do
    REDIS_PORT=$(free_port)
    rm -f "$WORK/redis/nodes.conf"
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --cluster-enabled yes \
        --cluster-config-file "$WORK/redis/nodes.conf" --dir "$WORK/redis" \
        --save "" --appendonly no --daemonize yes --logfile "$WORK/redis/redis.log" || true
    for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
    redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break
    echo "redis-server did not start on $REDIS_PORT (attempt $attempt):"
    tail -n 5 "$WORK/redis/redis.log" 2>/dev/null | sed 's/^/   /' || true
done
redis-cli -p "$REDIS_PORT" cluster addslotsrange 0 16383 >/dev/null
for _ in $(seq 100); do
    redis-cli -p "$REDIS_PORT" cluster info | grep -q cluster_state:ok && break; sleep 0.1
done
check "cluster on 127.0.0.1:$REDIS_PORT is up" \
    sh -c "redis-cli -p $REDIS_PORT cluster info | grep -q cluster_state:ok"

echo "== dpkg -i"
dpkg -i "$DEB"
check "binary installed" test -x /usr/bin/mithril
check "mithril --version runs" sh -c "/usr/bin/mithril --version | grep -q '^mithril '"
check "man page mithril(8)" test -f /usr/share/man/man8/mithril.8.gz
check "man page mithril.conf(5)" test -f /usr/share/man/man5/mithril.conf.5.gz
check "conffile /etc/mithril/mithril.conf" test -f /etc/mithril/mithril.conf
check "conffile registered" sh -c "dpkg-query -W -f='\${Conffiles}' mithril | grep -q /etc/mithril/mithril.conf"
check "conffile is root:mithril 0640" \
    sh -c "[ \"\$(stat -c %U:%G:%a /etc/mithril/mithril.conf)\" = root:mithril:640 ]"
check "systemd unit installed" test -f /lib/systemd/system/mithril.service
check "system user mithril" sh -c "getent passwd mithril | grep -q ':/nonexistent:'"
echo "-- systemd-analyze verify:"
systemd-analyze verify /lib/systemd/system/mithril.service 2>&1 | sed 's/^/   /' || true

echo "== configure: point the installed config at the test cluster"
PROXY_PORT=$(free_port)
sed -i -e "s/^cluster-nodes .*/cluster-nodes 127.0.0.1:$REDIS_PORT/" \
    -e "s/^port .*/port $PROXY_PORT/" /etc/mithril/mithril.conf
grep -E '^(cluster-nodes|port) ' /etc/mithril/mithril.conf | sed 's/^/   /'

unit_line() { sed -n "s/^$1=//p" /lib/systemd/system/mithril.service; }
PRE=$(unit_line ExecStartPre)
START=$(unit_line ExecStart)
echo "== ExecStartPre: $PRE"
# shellcheck disable=SC2086
if runuser -u mithril -- $PRE; then pass "ExecStartPre (-t) as mithril"; else fail "ExecStartPre"; fi

echo "== ExecStart: $START (as mithril, NOTIFY_SOCKET set)"
python3 - "$WORK/notify.sock" > "$WORK/notify.out" 2>&1 <<'EOF' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
s.settimeout(30)
for _ in range(2):
    print(s.recv(4096).decode(), flush=True)
EOF
NOTIFY_PID=$!
for _ in $(seq 50); do [ -S "$WORK/notify.sock" ] && break; sleep 0.1; done
# shellcheck disable=SC2086
NOTIFY_SOCKET="$WORK/notify.sock" runuser -u mithril -- $START > "$WORK/mithril.out" 2>&1 &
PROXY_PID=$!
for _ in $(seq 100); do grep -q READY=1 "$WORK/notify.out" 2>/dev/null && break; sleep 0.1; done
check "READY=1 received" grep -q READY=1 "$WORK/notify.out"
check "runs as user mithril" sh -c "ps -o user= -p \$(pgrep -u mithril -x mithril | head -n 1) | grep -q mithril"
check "SET through the proxy" sh -c "[ \"\$(redis-cli -p $PROXY_PORT set deb:test hello)\" = OK ]"
check "GET through the proxy" sh -c "[ \"\$(redis-cli -p $PROXY_PORT get deb:test)\" = hello ]"
check "the key is in the cluster" sh -c "[ \"\$(redis-cli -p $REDIS_PORT get deb:test)\" = hello ]"
for i in $(seq 100); do echo "INCR deb:counter"; done | redis-cli -p "$PROXY_PORT" > /dev/null
check "100 pipelined INCRs" sh -c "[ \"\$(redis-cli -p $PROXY_PORT get deb:counter)\" = 100 ]"
MPID=$(pgrep -u mithril -x mithril | head -n 1)
kill -HUP "$MPID"
sleep 0.2
check "alive after SIGHUP (systemctl reload)" kill -0 "$MPID"
kill -TERM "$MPID"
STATUS=0
wait "$PROXY_PID" || STATUS=$?
PROXY_PID=""
if [ "$STATUS" = 0 ]; then pass "exit status 0 after SIGTERM"; else fail "exit status $STATUS after SIGTERM"; fi
for _ in $(seq 50); do grep -q STOPPING=1 "$WORK/notify.out" && break; sleep 0.1; done
check "STOPPING=1 received" grep -q STOPPING=1 "$WORK/notify.out"
echo "-- mithril's output:"
sed 's/^/   /' "$WORK/mithril.out"

echo "== dpkg -r"
dpkg -r mithril
check "binary removed" test ! -e /usr/bin/mithril
check "unit removed" test ! -e /lib/systemd/system/mithril.service
check "modified conffile kept" sh -c "grep -q '^port $PROXY_PORT' /etc/mithril/mithril.conf"
check "user kept until purge" getent passwd mithril

echo "== dpkg --purge"
dpkg --purge mithril
check "conffile purged" test ! -e /etc/mithril/mithril.conf
check "/etc/mithril removed" test ! -e /etc/mithril
check "user removed" sh -c "! getent passwd mithril"
check "group removed" sh -c "! getent group mithril"

echo
if [ "$FAILED" = 0 ]; then echo "ALL PASSED"; else echo "SOME CHECKS FAILED"; fi
exit "$FAILED"
