#!/usr/bin/env bash
# Checks ensure-openmpi.sh's logic without touching the machine's packages: each case runs the
# script with a PATH of stubs (apt-get, mpirun, ldconfig, sudo) beside the few real tools it uses.
#   ensure-openmpi-selftest.sh [path/to/ensure-openmpi.sh]
# Exit status 0 when every case behaves; the failing case is named otherwise.
set -uo pipefail

SCRIPT="$(cd "$(dirname "${1:-$(dirname "$0")/ensure-openmpi.sh}")" && pwd)/$(basename "${1:-ensure-openmpi.sh}")"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
failures=0

# A fresh stub folder: real bash, env, id, sleep, head, cat, grep, touch and ln; stubs for the rest.
#   $1: "installed" to start with MPI present; $2: how many apt-get calls fail on a held lock
#   (-1: every call); $3: "broken" for an apt-get that fails for another reason
make_stubs() {
    local dir="$WORK/case$RANDOM"
    mkdir -p "$dir/bin" "$dir/state"
    for tool in bash env id sleep head cat grep touch ln; do
        ln -s "$(command -v "$tool")" "$dir/bin/$tool"
    done
    echo "${2:-0}" >"$dir/state/lock-failures"
    [ "${1:-}" = installed ] && touch "$dir/state/installed"
    # mpirun: on PATH once "installed"
    cat >"$dir/state/mpirun" <<'EOF'
#!/usr/bin/env bash
echo "mpirun (Open MPI) 4.1.4 (stub)"
EOF
    chmod +x "$dir/state/mpirun"
    [ -e "$dir/state/installed" ] && ln -s "$dir/state/mpirun" "$dir/bin/mpirun"
    # ldconfig -p: a long listing (far more than a pipe buffer), libmpi.so first once installed,
    # so that a `| grep -q` exits early and ldconfig meets SIGPIPE
    cat >"$dir/bin/ldconfig" <<EOF
#!/usr/bin/env bash
echo "20000 libs found in cache \\\`/etc/ld.so.cache'"
[ -e "$dir/state/installed" ] && echo "	libmpi.so.40 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libmpi.so.40"
for ((i = 0; i < 20000; i++)); do echo "	libstub\$i.so.1 (libc6,x86-64) => /usr/lib/libstub\$i.so.1"; done
EOF
    # apt-get: fails on a held lock as often as asked, then installs (or fails otherwise)
    cat >"$dir/bin/apt-get" <<EOF
#!/usr/bin/env bash
echo "\$*" >>"$dir/state/calls"
left=\$(cat "$dir/state/lock-failures")
if [ "\$left" != 0 ]; then
    [ "\$left" -gt 0 ] && echo \$((left - 1)) >"$dir/state/lock-failures"
    echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)" >&2
    echo "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?" >&2
    exit 100
fi
if [ "${3:-}" = broken ]; then echo "E: Unable to locate package openmpi-bin" >&2; exit 100; fi
case " \$* " in
    *" install "*) touch "$dir/state/installed"; ln -sf "$dir/state/mpirun" "$dir/bin/mpirun" ;;
esac
EOF
    chmod +x "$dir/bin/ldconfig" "$dir/bin/apt-get"
    echo "$dir"
}

# Runs the script in a stub folder: expect "ok" or "fail", and a text its output must hold.
check() {
    local name="$1" dir="$2" expect="$3" text="$4" out status=0
    out="$(PATH="$dir/bin" ENSURE_OPENMPI_LOCK_WAIT_S="${LOCK_WAIT:-20}" \
        ENSURE_OPENMPI_RETRY_PAUSE_S=0.2 "$dir/bin/bash" "$SCRIPT" 2>&1)" || status=$?
    if { [ "$expect" = ok ] && [ "$status" != 0 ]; } || { [ "$expect" = fail ] && [ "$status" = 0 ]; } \
        || [[ "$out" != *"$text"* ]]; then
        echo "FAIL $name (exit $status, expected $expect and \"$text\"):"
        printf '%s\n' "$out" | sed 's/^/    /'
        failures=$((failures + 1))
    else
        echo "ok   $name"
    fi
}

check "MPI present, ldconfig's listing longer than a pipe buffer" \
    "$(make_stubs installed)" ok "ensure-openmpi: found"
check "MPI missing: installed through apt-get" \
    "$(make_stubs)" ok "ensure-openmpi: installed"
check "the package lock held for three apt-get calls: waits, then installs" \
    "$(make_stubs "" 3)" ok "trying again"
dir="$(make_stubs "" 3)"
check "after waiting for the lock, the install itself ran" "$dir" ok "ensure-openmpi: installed"
if ! grep -q "install" "$dir/state/calls"; then
    echo "FAIL apt-get install was never called"; failures=$((failures + 1))
fi
LOCK_WAIT=1 check "the lock never freed: gives up after the bound, saying what to do" \
    "$(make_stubs "" -1)" fail "ENSURE_OPENMPI_LOCK_WAIT_S"
check "apt-get fails for another reason: no waiting, its error shown" \
    "$(make_stubs "" 0 broken)" fail "Unable to locate package"

if [ "$failures" != 0 ]; then
    echo "ensure-openmpi-selftest: $failures case(s) failed"
    exit 1
fi
echo "ensure-openmpi-selftest: all cases passed"
