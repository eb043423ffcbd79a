#!/usr/bin/env bash
# Makes sure an MPI launcher and libmpi are present for amp-distributed's tests.
# Finds Open MPI (or any MPI with mpirun and libmpi.so) first; on Debian/Ubuntu without it,
# installs Debian's Open MPI (openmpi-bin, libopenmpi-dev) through apt-get, with sudo when not root.
# When another apt-get or dpkg holds the package lock (a fresh machine's unattended upgrades, a
# neighbouring build), waits for it, at most ENSURE_OPENMPI_LOCK_WAIT_S seconds (default 300).
# Prints the mpirun it found. Exit status 0 when usable, non-zero with a message otherwise.
set -euo pipefail

LOCK_WAIT_S="${ENSURE_OPENMPI_LOCK_WAIT_S:-300}"
RETRY_PAUSE_S="${ENSURE_OPENMPI_RETRY_PAUSE_S:-5}"

have_mpi() {
    command -v mpirun >/dev/null 2>&1 || return 1
    # No pipe into `grep -q`: grep exits at the first match, ldconfig then dies of SIGPIPE, and
    # under pipefail the pipeline fails although the library is there.
    local libraries
    libraries="$(ldconfig -p 2>/dev/null)" || return 1
    [[ "$libraries" == *libmpi.so* ]]
}

if have_mpi; then
    echo "ensure-openmpi: found $(command -v mpirun) ($(mpirun --version 2>/dev/null | head -n 1))"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-openmpi: no mpirun/libmpi.so and no apt-get: install Open MPI 4.x" \
        "(mpirun on PATH, libmpi.so known to ldconfig) and run the tests again" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
        echo "ensure-openmpi: not root and no sudo: run 'apt-get install -y openmpi-bin libopenmpi-dev' as root" >&2
        exit 1
    fi
fi

# Runs apt-get with its arguments; while it fails because another process holds apt's or dpkg's
# lock, tries again every RETRY_PAUSE_S seconds until LOCK_WAIT_S have passed. apt-get itself also
# waits for the dpkg lock (DPkg::Lock::Timeout), but not for the lists lock of `apt-get update`.
apt_get_waiting() {
    local deadline=$((SECONDS + LOCK_WAIT_S)) output status
    while true; do
        status=0
        output="$($SUDO apt-get -o DPkg::Lock::Timeout="$LOCK_WAIT_S" "$@" 2>&1)" || status=$?
        if [ "$status" = 0 ]; then
            return 0
        fi
        case "$output" in
            *"Could not get lock"* | *"Unable to acquire the dpkg frontend lock"* | *"Unable to lock"*)
                if [ "$SECONDS" -ge "$deadline" ]; then
                    printf '%s\n' "$output" >&2
                    echo "ensure-openmpi: another apt-get or dpkg still holds the package lock" \
                        "after ${LOCK_WAIT_S} s: wait for it to finish (or set" \
                        "ENSURE_OPENMPI_LOCK_WAIT_S to wait longer) and run the tests again" >&2
                    return "$status"
                fi
                echo "ensure-openmpi: the package lock is held by another process; trying again" \
                    "in ${RETRY_PAUSE_S} s (at most $((deadline - SECONDS)) s more)"
                sleep "$RETRY_PAUSE_S"
                ;;
            *)
                printf '%s\n' "$output" >&2
                return "$status"
                ;;
        esac
    done
}

echo "ensure-openmpi: installing openmpi-bin and libopenmpi-dev with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt_get_waiting update -qq || true
apt_get_waiting install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev
have_mpi || { echo "ensure-openmpi: apt-get finished but mpirun/libmpi.so is still missing" >&2; exit 1; }
echo "ensure-openmpi: installed $(command -v mpirun) ($(mpirun --version 2>/dev/null | head -n 1))"
