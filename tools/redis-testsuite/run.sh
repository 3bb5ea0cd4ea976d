#!/usr/bin/env bash
# Runs units of Redis's own Tcl test suite against mithril and against a
# one-node Redis Cluster that owns every slot, and prints passed / failed /
# skipped per unit for both.
#
#   tools/redis-testsuite/run.sh [options] SUITE_DIR [UNIT ...]
#
# SUITE_DIR is a checkout of the Redis release matching redis-server (it
# must hold `runtest` and `tests/`); this script downloads nothing. UNITS
# default to the 31 units of issue 14's "done when": unit/type/string, incr,
# list, list-2, list-3, set, zset, hash, stream, stream-cgroups; unit/keyspace,
# expire, scan, multi, pubsub, protocol, info-command, tracking, dump, sort,
# bitops, bitfield, geo, hyperloglog, scripting, functions, quit, other,
# lazyfree, introspection-2.
#
# Options:
#   -m PATH     mithril binary (default target/release/mithril)
#   -o DIR      keep the logs there (default: a new temp dir, printed)
#   -p PORT     first of the N+2 consecutive ports to use (default 22700); the
#               nodes' cluster bus ports are 10000 above, so keep them below
#               the kernel's ephemeral range (32768 by default), where other
#               programs' outgoing connections could take them
#   --masters N masters behind mithril (default 3)
#   --shim      load shim.tcl (see below) into the mithril runs
#   --skip      skip through mithril the tests of the skip files (see below)
#   --durable   pass --durable to runtest: an unexpected error reply counts as
#               that test's failure instead of ending the unit (more tests
#               run, so the counts differ from the plain command's)
#   --no-debug  pass --tags -needs:debug to runtest (leave out the tests that
#               need DEBUG)
#   --no-direct run the units through mithril only (faster iterations; the
#               direct columns print as -)
#   --baseport P  pass --baseport P to runtest: its control port is then
#               looked for from P-32 up instead of near 21079, so two runs on
#               one machine (each with its own -p and P) do not collide
#
# What runs: N masters formed into a cluster with mithril in front, and a
# separate single redis-server with every slot (the "direct" baseline).
# The nodes are started as Redis's own CI starts its external server for
# this suite: DEBUG, protected configs and MODULE enabled, no save.
# Each unit runs alone, first through mithril, then direct, with the suite
# unmodified and exactly the command of the issue,
#   ./runtest --host 127.0.0.1 --port P --cluster-mode --tags -slow --single UNIT
# plus --timeout 120 (a per-test watchdog: it only shortens a hang, runtest's
# own default is 20 minutes) and whatever the options above add.
#
# The suite is copied to a temp dir. With --shim, shim.tcl (beside this
# script) is loaded there: on mithril's port, CONFIG and MEMORY USAGE go
# straight to the masters (see the file), the suite's ways of preparing and
# inspecting a server, which mithril answered itself or left out.
# With --skip, the mithril runs skip (runtest --skipfile) the tests listed in
# skip-documented.txt, and with more than one master those in
# skip-multimaster.txt: each group there says which difference it tests.
# They are counted apart ("design"); the direct runs skip nothing. Neither
# is on by default: the default mode is the suite as Redis ships it.
# Everything started is stopped on exit (by PID). One run at a time per
# machine unless each run has its own -p and --baseport: runtest's own
# control port is near 21079 otherwise.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
mithril=target/release/mithril
logdir=
base=22700
shim=0
skip=0
durable=0
nodebug=0
nodirect=0
rtbase=
masters=3
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
        -m) mithril=$2; shift 2 ;;
        -o) logdir=$2; shift 2 ;;
        -p) base=$2; shift 2 ;;
        --shim) shim=1; shift ;;
        --skip) skip=1; shift ;;
        --durable) durable=1; shift ;;
        --no-debug) nodebug=1; shift ;;
        --no-direct) nodirect=1; shift ;;
        --baseport) rtbase=$2; shift 2 ;;
        --masters) masters=$2; shift 2 ;;
        -h|--help) usage ;;
        -*) echo "unknown option $1" >&2; usage ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] || usage
suite=$(cd "$1" && pwd); shift
units=("$@")
if [ ${#units[@]} -eq 0 ]; then
    units=(unit/type/string unit/type/incr unit/type/list unit/type/list-2 unit/type/list-3
           unit/type/set unit/type/zset unit/type/hash unit/type/stream unit/type/stream-cgroups
           unit/keyspace unit/expire unit/scan unit/multi unit/pubsub unit/protocol
           unit/info-command unit/tracking unit/dump unit/sort unit/bitops unit/bitfield
           unit/geo unit/hyperloglog unit/scripting unit/functions unit/quit unit/other
           unit/lazyfree unit/introspection-2)
fi
[ -x "$suite/runtest" ] && [ -d "$suite/tests" ] || { echo "$suite: no runtest and tests/" >&2; exit 2; }
[ -x "$mithril" ] || { echo "$mithril: not found (cargo build --release)" >&2; exit 2; }
for tool in redis-server redis-cli tclsh; do
    command -v $tool >/dev/null || { echo "$tool is needed" >&2; exit 2; }
done
mithril=$(cd "$(dirname "$mithril")" && pwd)/$(basename "$mithril")

work=$(mktemp -d /tmp/mithril-redistests.XXXXXX)
[ -n "$logdir" ] || logdir=$work/logs
mkdir -p "$logdir"
pids=()
alive() { for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
stop_all() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    # A node stuck in a script a test left running ignores SIGTERM.
    for _ in $(seq 50); do alive || break; sleep 0.1; done
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    pids=()
    rm -rf "$work"/node* "$work/mithril.conf"
}
cleanup() {
    stop_all
    rm -rf "$work/suite"
    rmdir "$work" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A port is busy when anything uses it locally, listening or connected
# (TIME-WAIT aside: redis-server binds with SO_REUSEADDR).
port_busy() {
    if command -v ss >/dev/null; then
        [ -n "$(ss -Htan exclude time-wait "( sport = :$1 )" 2>/dev/null)" ]
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
    fi
}
direct_port=$base
mithril_port=$((base + 1))
master_ports=()
nodes=""
for ((i = 0; i < masters; i++)); do
    master_ports+=($((base + 2 + i)))
    nodes="$nodes 127.0.0.1:$((base + 2 + i))"
done

start_node() { # port
    local dir=$work/node$1
    mkdir -p "$dir"
    redis-server --port "$1" --bind 127.0.0.1 --cluster-enabled yes \
        --cluster-config-file nodes.conf --save '' --appendonly no \
        --enable-debug-command yes --enable-protected-configs yes --enable-module-command yes \
        --dir "$dir" --logfile "$dir/redis.log" >/dev/null 2>&1 &
    pids+=($!)
}
wait_ping() { # port
    for _ in $(seq 100); do
        [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.1
    done
    echo "nothing answers on port $1" >&2
    tail -n 3 "$work/node$1/redis.log" "$logdir"/*.proxy.log 2>/dev/null | tail -n 8 >&2
    exit 1
}
wait_cluster_ok() { # port
    for _ in $(seq 200); do
        redis-cli -p "$1" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && return 0
        sleep 0.1
    done
    echo "the cluster on port $1 did not become ok" >&2; exit 1
}

# Fresh nodes and a fresh mithril for every unit: tests change server
# settings (encodings, notifications...) that must not leak into the next.
start_all() { # mithril log file
    for p in $direct_port $mithril_port "${master_ports[@]}"; do
        for q in $p $((p + 10000)); do
            if port_busy $q; then echo "port $q is in use; pick another range with -p" >&2; exit 1; fi
        done
    done
    start_node $direct_port
    for p in "${master_ports[@]}"; do start_node $p; done
    for p in $direct_port "${master_ports[@]}"; do wait_ping $p; done
    redis-cli -p $direct_port cluster addslotsrange 0 16383 >/dev/null
    # Slots split evenly; every master meets the first one.
    for ((i = 0; i < masters; i++)); do
        p=${master_ports[$i]}
        redis-cli -p $p cluster set-config-epoch $((i + 1)) >/dev/null
        redis-cli -p $p cluster addslotsrange $((i * 16384 / masters)) \
            $(((i + 1) * 16384 / masters - 1)) >/dev/null
        [ $i -eq 0 ] || redis-cli -p "${master_ports[0]}" cluster meet 127.0.0.1 $p >/dev/null
    done
    for p in $direct_port "${master_ports[@]}"; do wait_cluster_ok $p; done
    printf 'bind 127.0.0.1\nport %s\ncluster-nodes 127.0.0.1:%s\nlogfile "%s"\n' \
        $mithril_port "${master_ports[0]}" "$1" > "$work/mithril.conf"
    "$mithril" -c "$work/mithril.conf" >>"$1" 2>&1 &
    pids+=($!)
    wait_ping $mithril_port
}

mkdir -p "$work/suite"
cp -r "$suite/tests" "$suite/runtest" "$work/suite/"
if [ $shim -eq 1 ]; then
    printf '\nif {[info exists ::env(MITHRIL_SHIM_PORT)]} {source {%s}}\n' "$here/shim.tcl" \
        >> "$work/suite/tests/support/redis.tcl"
fi

count() { # log pattern
    sed 's/\x1b\[[0-9;]*m//g' "$1" | grep -c "^\[$2\]" || true
}
skipfile=$work/suite/skip-mithril.txt
: > "$skipfile"
if [ $skip -eq 1 ]; then
    cat "$here/skip-documented.txt" >> "$skipfile"
    [ "$masters" -eq 1 ] || cat "$here/skip-multimaster.txt" >> "$skipfile"
fi
run_unit() { # unit target port -> "passed failed skipped by-design note"
    local log=$logdir/$(echo "$1" | tr / _).$2.log
    local extra=()
    [ $durable -eq 0 ] || extra+=(--durable)
    [ $nodebug -eq 0 ] || extra+=(--tags -needs:debug)
    [ -z "$rtbase" ] || extra+=(--baseport "$rtbase")
    [ "$2" = mithril ] && [ $skip -eq 1 ] && extra+=(--skipfile "$skipfile")
    (
        cd "$work/suite"
        if [ "$2" = mithril ] && [ $shim -eq 1 ]; then
            export MITHRIL_SHIM_PORT=$3 MITHRIL_SHIM_NODES="$nodes"
        fi
        timeout 900 ./runtest --host 127.0.0.1 --port "$3" --cluster-mode \
            --tags -slow --single "$1" --timeout 120 "${extra[@]}"
    ) >"$log" 2>&1 || true
    local ok err ign skp exc note=""
    ok=$(count "$log" ok); err=$(count "$log" err); ign=$(count "$log" ignore)
    skp=$(count "$log" skip); exc=$(count "$log" exception)
    [ "$exc" -eq 0 ] || note="unit aborted"
    grep -q TIMEOUT "$log" && note="timeout"
    [ $((ok + err + ign + skp)) -gt 0 ] || note="no test ran, see $log"
    echo "$ok $err $ign $skp $note"
}

# Tests skipped through mithril by a skip file that the direct run skipped
# by its tags as well (runtest checks the skip file first).
overlap() { # unit
    local base=$logdir/$(echo "$1" | tr / _) n=0 name
    local direct
    direct=$(sed 's/\x1b\[[0-9;]*m//g' "$base.direct.log")
    while IFS= read -r name; do
        if grep -qF "[ignore]: $name: " <<<"$direct"; then n=$((n + 1)); fi
    done < <(sed 's/\x1b\[[0-9;]*m//g' "$base.mithril.log" | sed -n 's/^\[skip\]: //p')
    echo $n
}

mode=$([ $shim -eq 1 ] && echo "shim" || echo "no shim")
mode="$mode, $([ $skip -eq 1 ] && echo "skip by design" || echo "no skip")"
[ $durable -eq 0 ] || mode="$mode, --durable"
[ $nodebug -eq 0 ] || mode="$mode, -needs:debug"
echo "redis test suite: $suite (redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'))"
echo "mithril ($mode) in front of $masters master(s) vs a one-node cluster; logs in $logdir"
echo "skipped: by the suite's tags (-slow, cluster/external...); design: by run.sh's skip files (--skip)"
printf '%-26s %29s   %21s\n' "" "mithril" "direct"
printf '%-26s %6s %6s %7s %6s   %6s %6s %7s\n' unit passed failed skipped design passed failed skipped
for u in "${units[@]}"; do
    start_all "$logdir/$(echo "$u" | tr / _).proxy.log"
    read -r mo me mi ms mnote < <(run_unit "$u" mithril $mithril_port)
    if [ $nodirect -eq 1 ]; then
        printf '%-26s %6s %6s %7s %6s   %6s %6s %7s  %s\n' "$u" "$mo" "$me" "$mi" "$ms" - - - \
            "${mnote:+mithril: $mnote}"
        stop_all
        continue
    fi
    read -r do de di ds dnote < <(run_unit "$u" direct $direct_port)
    # A listed test the direct run skipped by its tags too counts as skipped.
    both=$(overlap "$u")
    ms=$((ms - both)); mi=$((mi + both))
    printf '%-26s %6s %6s %7s %6s   %6s %6s %7s  %s\n' "$u" "$mo" "$me" "$mi" "$ms" "$do" "$de" \
        "$((di + ds))" "${mnote:+mithril: $mnote }${dnote:+direct: $dnote}"
    stop_all
done
