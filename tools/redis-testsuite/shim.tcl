# Adapter loaded into a private copy of Redis's Tcl test suite by
# tools/redis-testsuite/run.sh --shim when it runs the suite through mithril.
#
# What it owns: the two commands the suite uses to set up and inspect the
# *server* (not the data path) that mithril by design answers itself or does
# not implement: CONFIG (mithril's CONFIG is about the proxy) and MEMORY
# USAGE (not implemented). For a client connected to mithril's port, these
# are sent straight to every master behind it (or one master, for reads),
# so the tests that only use them to prepare a server still exercise
# mithril on everything else. FLUSHDB, KEYS, SCRIPT and FUNCTION go through
# mithril, which runs them on every master.
#
# How: the suite's client calls ::redis::__method__NAME, when it exists,
# instead of sending NAME; hooks are defined for the lower- and upper-case
# spellings tests use.
#
# Invariants: active only when MITHRIL_SHIM_PORT names the port the suite
# talks to and MITHRIL_SHIM_NODES lists the masters ("host:port ...");
# clients of any other port are untouched. Every command not listed here,
# and every listed one outside the cases below, goes through mithril as the
# test wrote it.
#
# Never: hide a data-path command from mithril, or change what a test
# asserts. The runner prints whether the shim was on above its table.

namespace eval ::mithril_shim {
    variable port $::env(MITHRIL_SHIM_PORT)
    variable nodes {}
    variable conns
    array set conns {}
    foreach a $::env(MITHRIL_SHIM_NODES) {
        lappend nodes [split $a :]
    }
}

# Is this client talking to mithril?
proc ::mithril_shim::ours {id} {
    variable port
    expr {[lindex $::redis::addr($id) 1] == $port}
}

# One command on one node, over the shim's own connection to it (opened
# once, reopened if it drops).
proc ::mithril_shim::on_node {node args} {
    variable conns
    set k [join $node :]
    if {![info exists conns($k)]} {
        lassign $node host nport
        set conns($k) [redis $host $nport 0 $::tls]
        $conns($k) reconnect 1
    }
    $conns($k) {*}$args
}

# Every master; the first reply (or the first error) is the result.
proc ::mithril_shim::on_all {args} {
    variable nodes
    set first {}
    set i 0
    foreach n $nodes {
        set r [on_node $n {*}$args]
        if {$i == 0} {set first $r}
        incr i
    }
    return $first
}

# The command as the test wrote it, through mithril. The name is sent in
# title case ("Config"), which no hook below is named after.
proc ::mithril_shim::through {id method argv} {
    ::redis::__dispatch__raw__ $id [string totitle $method] $argv
}

# A client that reads its replies later, or reads them raw.
proc ::mithril_shim::indirect {id} {
    expr {$::redis::deferred($id) || $::redis::readraw($id)}
}

# A string reply already computed. For a client that reads later or raw,
# mithril echoes it, so the client reads it where and how it expects.
proc ::mithril_shim::deliver {id value} {
    if {[indirect $id]} {
        return [::redis::__dispatch__raw__ $id ECHO [list $value]]
    }
    return $value
}

# Runs `script` (a command on the nodes) and hands its reply, or its error,
# to the client as a reply from mithril would reach it.
proc ::mithril_shim::answer {id script} {
    if {![catch {uplevel 1 $script} r]} {
        return [deliver $id $r]
    }
    if {[indirect $id]} {
        # The same error, raised by mithril in the client's stream.
        return [::redis::__dispatch__raw__ $id EVAL \
            [list {return redis.error_reply(ARGV[1])} 0 $r]]
    }
    error $r
}

proc ::redis::__method__config {id fd args} {
    set sub [string tolower [lindex $args 0]]
    if {![::mithril_shim::ours $id] || $sub eq {rewrite}} {
        return [::mithril_shim::through $id config $args]
    }
    switch -- $sub {
        set {
            return [::mithril_shim::answer $id {::mithril_shim::on_all config {*}$args}]
        }
        resetstat {
            ::mithril_shim::on_all config resetstat
            return [::mithril_shim::through $id config $args]
        }
        get {
            if {![::mithril_shim::indirect $id]} {
                return [::mithril_shim::on_node [lindex $::mithril_shim::nodes 0] config {*}$args]
            }
        }
    }
    ::mithril_shim::through $id config $args
}

# MEMORY USAGE key: asked of the master that owns the key's slot (the others
# answer MOVED).
proc ::redis::__method__memory {id fd args} {
    if {![::mithril_shim::ours $id] || [::mithril_shim::indirect $id]
        || [string tolower [lindex $args 0]] ne {usage}} {
        return [::mithril_shim::through $id memory $args]
    }
    foreach n $::mithril_shim::nodes {
        if {[catch {::mithril_shim::on_node $n memory {*}$args} r]} {
            if {[string match {MOVED*} $r]} continue
            error $r
        }
        return $r
    }
    error "mithril shim: no master owns the key"
}

foreach name {config memory} {
    interp alias {} ::redis::__method__[string toupper $name] {} ::redis::__method__$name
}
