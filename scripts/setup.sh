#!/usr/bin/env bash
# Set-up shared by demo.sh and test.sh: install what is missing (Debian packages), configure and
# build (Release) into build/, and prepare the bundled data under data/.
#
# Usage: scripts/setup.sh            (idempotent; a second run only rebuilds what changed)
# Environment: BUILD_DIR (default <repo>/build), SHARDTRAIN_CUDA (AUTO|ON|OFF, default AUTO),
#              SHARDTRAIN_NATIVE (ON|OFF, default ON: -march=native; OFF for mixed-processor clusters),
#              JOBS (parallel build jobs, default: number of cores),
#              TARGETS (the CMake targets to build, e.g. "ddp-train release-gate"; default: everything,
#              the test binary included; the demo builds only the tools it runs).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$here/build}"
jobs="${JOBS:-$(nproc)}"
say() { echo "setup.sh: $*" >&2; }

# Open MPI refuses to run as root unless told; the project's scripts and tests run as root in CI.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

packages=(cmake g++ make pkg-config git python3 libopenmpi-dev openmpi-bin libhdf5-dev hdf5-tools
          libcli11-dev nlohmann-json3-dev catch2 libdnnl-dev fortunes gnuplot-nox
          libopenblas-openmp-dev libblis-openmp-dev  # the CPU backend's other GEMM libraries (cmake/gemm_libraries.cmake)
          python3-numpy   # python3-numpy: the GPT-2 export check (tests/clients/check-gpt2-export.py)
          slurmctld slurmd slurm-client munge  # Slurm: the one-node cluster of tests/scripts/slurm_chain.sh
          man-db          # the installed man pages (ctest install_prefix)
          patchelf xz-utils debootstrap   # the device bundle and its rehearsal (scripts/device-bundle.sh)
          ccache          # a rebuild after a checkout or in a second worktree compiles only what changed
          jq              # the scripts and tests read JSON fields with jq
          prometheus-cpp-dev  # the trainers' --metrics-port endpoint (libcore/src/telemetry/metrics_endpoint.cpp)
          protobuf-compiler libprotobuf-dev libboost-dev  # TensorBoard event files: protoc, the protobuf runtime, Boost.CRC (libcore/src/telemetry/tensorboard_events.cpp)
          prometheus prometheus-alertmanager)  # the alert rules' check and the metrics proof (tests/scripts/metrics_alerts.sh)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" -eq 0 ]; then
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q "${missing[@]}" >/dev/null
  else
    say "missing packages: ${missing[*]}"
    say "run: sudo apt-get update && sudo apt-get install -y ${missing[*]}"
    exit 2
  fi
fi

say "configuring and building (Release) into $build (logs: $build/setup-*.log)"
mkdir -p "$build"
# ccache keys on paths relative to the repository (CCACHE_BASEDIR), so clones and worktrees share it.
launcher=()
if command -v ccache >/dev/null; then
  ccache_cmd="env;CCACHE_BASEDIR=$here;ccache"
  launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=$ccache_cmd" "-DCMAKE_CUDA_COMPILER_LAUNCHER=$ccache_cmd")
fi
cmake -S "$here" -B "$build" "${launcher[@]}" -DCMAKE_BUILD_TYPE=Release -DSHARDTRAIN_CUDA="${SHARDTRAIN_CUDA:-AUTO}" \
  -DSHARDTRAIN_NATIVE="${SHARDTRAIN_NATIVE:-ON}" \
  >"$build/setup-configure.log" 2>&1 || { cat "$build/setup-configure.log" >&2; exit 1; }
grep "shardtrain:" "$build/setup-configure.log" | sed 's/^-- /setup.sh: /' >&2 || true
read -r -a targets <<<"${TARGETS:-}"
cmake --build "$build" -j "$jobs" ${targets[@]+--target "${targets[@]}"} >"$build/setup-build.log" 2>&1 ||
  { tail -50 "$build/setup-build.log" >&2; exit 1; }

say "preparing bundled data"
DATA_DIR="${DATA_DIR:-$here/data}" "$here/scripts/prepare-data.sh" "$build" >/dev/null
