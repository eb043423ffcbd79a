#!/usr/bin/env bash
# Makes sure an MPI launcher and libmpi are present for amp-distributed's tests.
# Finds Open MPI (or any MPI with mpirun and libmpi.so) first; on Debian/Ubuntu without it,
# installs Debian's Open MPI (openmpi-bin, libopenmpi-dev) through apt-get, with sudo when not root.
# Prints the mpirun it found. Exit status 0 when usable, non-zero with a message otherwise.
set -euo pipefail

have_mpi() {
    command -v mpirun >/dev/null 2>&1 && ldconfig -p 2>/dev/null | grep 'libmpi\.so' >/dev/null
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

echo "ensure-openmpi: installing openmpi-bin and libopenmpi-dev with apt-get"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || true
$SUDO apt-get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev >/dev/null
have_mpi || { echo "ensure-openmpi: apt-get finished but mpirun/libmpi.so is still missing" >&2; exit 1; }
echo "ensure-openmpi: installed $(command -v mpirun) ($(mpirun --version 2>/dev/null | head -n 1))"
