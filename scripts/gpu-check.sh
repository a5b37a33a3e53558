#!/usr/bin/env bash
# gpu-check.sh: the device proof of issue 15 in one prepared script, for a session that is lent a
# GPU (about 15 minutes of device time in all, at most 10 per command, start-up included). It
# builds Release with CUDA, then runs stages, each under its own time limit so that one failure
# does not eat the budget, and writes every result as JSON under $OUT/gpu-check/:
#   <stage>.json   {stage, status: pass|fail|timeout|skipped, seconds, limit_s, exit_code, log,
#                   reason, result: {...stage figures...}}
#   <stage>.log    the stage's full output
#   summary.json   every stage's status and seconds, in order
# Stages (docs/PERFORMANCE.md "gpu-check" says what each proves):
#   part 1: env build data gpu_tests cpu_gpu_equivalence shared_gpu_2rank deterministic_bitwise
#           resume_cross_device
#   part 2: env data bf16_vs_fp32 gpt2_124m cpu_scaling
# Run part 1 and part 2 as two commands (each fits 10 minutes: the script skips a stage whose
# limit no longer fits the part's budget, PART_BUDGET_S, default 540 s, and says so in its JSON).
#
# From the device bundle (scripts/device-bundle.sh; docs/RUNBOOK.md "GPUs"): nothing is built. The
# archive travels as an ignored file; each command unpacks it and runs one part:
#   tar -C /tmp -xJf gpu-bundle/shardtrain-gpu-bundle.tar.xz && /tmp/shardtrain-gpu-bundle/gpu-check.sh --part 1
#   tar -C /tmp -xJf gpu-bundle/shardtrain-gpu-bundle.tar.xz && /tmp/shardtrain-gpu-bundle/gpu-check.sh --part 2
# There the script finds manifest.json beside itself: BUILD_DIR is the bundle, the build stage checks
# the sha256 of every file and links the device's cuBLAS/cuBLASLt/NCCL (BUNDLE/launch), FORTUNES is
# the bundle's, and PART_BUDGET_S defaults to 480 s (the unpacking and the machine's start fit beside).
#
# Usage: scripts/gpu-check.sh [--part 1|2|all] [--only STAGE[,STAGE...]] [--dry-run] [--list]
#   --list      print the plan (stages, limits, commands' shape) and exit
#   --dry-run   no device needed: run every stage on the CPU with tiny sizes (GPU stages run their
#               CPU side, or check that [gpu] tests skip with exit 77), using an existing build
#               (BUILD_DIR, default build); checks the script's plumbing and the JSON it writes
# Environment: OUT (default ./gpu-check-out), BUILD_DIR (default build-gpu; dry run: build),
#   PART_BUDGET_S (540; 480 from the bundle), GPT2_MICRO_BATCH (16), JOBS (build parallelism, default nproc),
#   FORTUNES (the fortunes dataset, default data/fortunes.h5; built there by prepare-data.sh
#   from /usr/share/games/fortunes when missing).
# Exit status: 0 when every stage run passed (skipped stages do not fail), 1 otherwise, 2 for
# usage errors.
# shellcheck disable=SC2317  # the stage functions run through `bash -c` under timeout
set -euo pipefail
set -a  # every variable below is exported: each stage runs in its own bash under `timeout`
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
self="$script_dir/$(basename "${BASH_SOURCE[0]}")"
# In the device bundle the script sits at the bundle's root beside manifest.json; in the repository,
# in scripts/.
if [ -f "$script_dir/manifest.json" ] && [ -x "$script_dir/launch" ]; then
  here="$script_dir" BUNDLE="$script_dir"
else
  here="$(cd "$script_dir/.." && pwd)" BUNDLE=""
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
part=all only="" dry=0 list=0
set +a

usage() { sed -n '2,35p' "$self" | sed 's/^# \{0,1\}//'; }
die() { echo "gpu-check.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --part) [ $# -ge 2 ] || die "--part needs 1, 2 or all"; part=$2; shift 2 ;;
    --only) [ $# -ge 2 ] || die "--only needs a stage list"; only=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    --list) list=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
case "$part" in 1|2|all) ;; *) die "--part must be 1, 2 or all (got '$part')" ;; esac

set -a
DRY=$dry
OUT="${OUT:-$PWD/gpu-check-out}"
res="$OUT/gpu-check"
if [ -n "$BUNDLE" ]; then
  BUILD="${BUILD_DIR:-$BUNDLE}"
  # The bundle's environment: Open MPI relocated into it, its bin first on PATH, the device's
  # cuBLAS/cuBLASLt/NCCL linked into lib/device (the env stage records the launcher's report).
  eval "$("$BUNDLE/launch" --env)"
else
  BUILD="${BUILD_DIR:-$here/$([ "$dry" = 1 ] && echo build || echo build-gpu)}"
fi
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac
BIN="$BUILD/bin"
WORK="$res/work"
PART_BUDGET_S="${PART_BUDGET_S:-$([ -n "$BUNDLE" ] && echo 480 || echo 540)}"
GPT2_MICRO_BATCH="${GPT2_MICRO_BATCH:-16}"
JOBS="${JOBS:-$(nproc)}"
FORTUNES="${FORTUNES:-$here/data/fortunes.h5}"
# The device under test, and sizes: the real ones, or tiny CPU ones for the dry run.
if [ "$dry" = 1 ]; then
  DEV=cpu LOWP=fp32 HIGHP=fp32 TRANSPORT=mpi STEPS_SHORT=4 STEPS_BF16=6 WARMUP=2 GPT2_STEPS=2
  SCALE_WORKERS=1,2 SCALE_STEPS=4
  small=(--layers 2 --d-model 64 --heads 2 --seq-len 32 --threads 1)
  gpt2=(--layers 2 --d-model 64 --heads 2 --seq-len 64 --vocab 512 --micro-batch 2 --global-batch 2)
else
  DEV=cuda LOWP=bf16 HIGHP=fp32 TRANSPORT=mpi STEPS_SHORT=12 STEPS_BF16=200 WARMUP=20 GPT2_STEPS=30
  SCALE_WORKERS=1,2,4,8 SCALE_STEPS=30
  small=(--layers 4 --d-model 256 --heads 4 --seq-len 256 --threads 1)
  gpt2=(--layers 12 --d-model 768 --heads 12 --seq-len 1024 --vocab 50304 --micro-batch "$GPT2_MICRO_BATCH"
        --global-batch "$GPT2_MICRO_BATCH")
fi
set +a

# ---- the plan: name, part, time limit (s), what it runs and proves ----
plan=(
  "env|12|20|record the device (nvidia-smi -L), nvcc, NCCL, cmake, MPI and tool versions"
  "build|1|$([ -n "$BUNDLE" ] && echo 60 || echo 300)|$([ -n "$BUNDLE" ] && echo "the bundle: sha256 of every file against manifest.json, device libraries linked, no build" || echo "cmake -DSHARDTRAIN_CUDA=ON Release; build the tools and shardtrain_tests (dry run: use BUILD_DIR)")"
  "data|12|90|data/fortunes.h5 (scripts/prepare-data.sh when missing) and a synthetic Markov set for the benchmark"
  "gpu_tests|1|150|shardtrain_tests [gpu] (every CUDA op vs the CPU, fused attention, bf16 products, NCCL at W=1, the decoder vs the PyTorch files) and [nccl]"
  "cpu_gpu_equivalence|1|60|ddp-train --deterministic on cpu and on cuda --precision fp32: step-log losses within rtol 1e-3 (equiv-check)"
  "shared_gpu_2rank|1|60|mpirun -np 2 ddp-train --device cuda --transport mpi (host staging, both ranks on GPU 0) vs 1 rank: losses within rtol 1e-3"
  "deterministic_bitwise|1|75|--deterministic fp32 on cuda: 2 ranks sharing the GPU vs 1 rank, params.h5 BITWISE (equiv-check)"
  "resume_cross_device|1|90|a cuda checkpoint resumed on cpu and a cpu one on cuda (fp32) vs a cpu-only run: WITHIN rtol 1e-3; a bf16 checkpoint resumes on cpu"
  "bf16_vs_fp32|2|180|the foundation model 200 steps on fortunes, bf16 vs fp32: every logged loss after warm-up within 2%, hold-out within 1%"
  "gpt2_124m|2|150|GPT-2 124M (12 x 768, 12 heads, T 1024, vocab 50304) bf16: tokens/s, MFU (6N + 12LTC) vs the measured and the datasheet peak"
  "cpu_scaling|2|200|scale-bench run --workers 1,2,4,8 on CPU ranks (16 cores: not oversubscribed): the E(W) table"
)

print_plan() {
  echo "gpu-check plan (part $part$([ "$dry" = 1 ] && echo ', dry run on the CPU'); results under $res):"
  for row in "${plan[@]}"; do
    IFS='|' read -r name parts limit what <<<"$row"
    selected "$name" "$parts" || continue
    printf '  %-22s part %-2s limit %4ss  %s\n' "$name" "$parts" "$limit" "$what"
  done
}

selected() {  # NAME PARTS: whether this invocation runs the stage
  local name=$1 parts=$2
  if [ -n "$only" ]; then [[ ",$only," == *",$name,"* ]]; return; fi
  [ "$part" = all ] || [[ "$parts" == *"$part"* ]]
}

# ---- helpers, exported to the stages ----
set -a
# gpu_check NAME ARGS...: a stage's result computation (scripts/lib/gpu_check.py; BUNDLE/scripts/lib/
# in the bundle, where `here` is the bundle).
gpu_check() { python3 "$here/scripts/lib/gpu_check.py" "$@"; }
# train NP RUN_DIR ARGS...: ddp-train under mpirun, output in RUN_DIR.log.
train() {
  local np=$1 dir=$2; shift 2
  local extra=()
  [ "$np" -gt "$(nproc)" ] && extra=(--oversubscribe)
  mkdir -p "$(dirname "$dir")"
  echo "+ mpirun -np $np ddp-train $* --run-dir $dir"
  mpirun -np "$np" "${extra[@]}" "$BIN/ddp-train" "$@" --run-dir "$dir" >"$dir.log" 2>&1 ||
    { local rc=$?; tail -20 "$dir.log"; return "$rc"; }
}
# verdict OUT_JSON equiv-check-args...: runs equiv-check with --json, prints the verdict line.
verdict() {
  local out=$1; shift
  local rc=0
  "$BIN/equiv-check" "$@" --json "$out" || rc=$?
  return "$rc"
}
set +a

stage_env() {
  gpu_check env "$res/env.result.json" "$DRY" "$BUNDLE"
}

stage_build() {
  if [ -n "$BUNDLE" ]; then stage_bundle; return; fi
  if [ "$DRY" = 1 ]; then
    for t in ddp-train equiv-check scale-bench data-prep; do [ -x "$BIN/$t" ] || { echo "dry run: $BIN/$t missing: build $BUILD first"; return 1; }; done
    [ -x "$BUILD/tests/shardtrain_tests" ] || { echo "dry run: $BUILD/tests/shardtrain_tests missing"; return 1; }
    echo "dry run: using the existing build $BUILD (not rebuilt)"
    echo '{"built": false, "dry_run": true}' >"$res/build.result.json"
    return 0
  fi
  cmake -S "$here" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSHARDTRAIN_CUDA=ON | tee "$WORK/configure.log"
  cmake --build "$BUILD" -j "$JOBS" --target shardtrain_tests ddp-train fsdp-train data-prep equiv-check scale-bench
  gpu_check build "$WORK/configure.log" "$res/build.result.json"
  grep -q "CUDA backend ON" "$WORK/configure.log"
}

# The bundle in place of a build: every file as the manifest says, the launcher's report, and the
# paths compiled into shardtrain_tests (its test data, the tools) linked to the bundle's copies.
stage_bundle() {
  "$BUNDLE/launch" --report | tee "$WORK/launch-report.txt"
  gpu_check bundle "$BUNDLE" "$WORK/launch-report.txt" "$res/build.result.json"
  for t in ddp-train equiv-check scale-bench data-prep; do [ -x "$BIN/$t" ] || { echo "bundle: $BIN/$t missing"; return 1; }; done
  [ "$DRY" = 1 ] || grep -q "all .* found" "$WORK/launch-report.txt" ||
    { echo "bundle: the device libraries are not all found (report above)"; return 1; }
}

stage_data() {
  mkdir -p "$WORK/data"
  if [ -f "$FORTUNES" ]; then
    echo "fortunes: $FORTUNES"
  elif [ -d /usr/share/games/fortunes ]; then
    DATA_DIR="$(dirname "$FORTUNES")" "$here/scripts/prepare-data.sh" "$BUILD"
  else
    echo "no fortunes corpus (data/fortunes.h5 missing and no /usr/share/games/fortunes): carry data/ to the device"
  fi
  "$BIN/data-prep" --synthetic markov --documents 64 --doc-tokens 20000 -o "$WORK/data/markov.h5" >/dev/null
  gpu_check data "$FORTUNES" "$WORK/data/markov.h5" "$res/data.result.json"
}

# The corpus for the training stages: fortunes when present, else the Markov set (said in the JSON).
corpus() { if [ -f "$FORTUNES" ]; then echo "$FORTUNES"; else echo "$WORK/data/markov.h5"; fi; }
export -f corpus

stage_gpu_tests() {
  local rc=0
  "$BUILD/tests/shardtrain_tests" "[gpu]" -r junit -o "$WORK/gpu_tests.xml" || rc=$?
  local nccl_rc=0
  "$BUILD/tests/shardtrain_tests" "[nccl]" || nccl_rc=$?
  gpu_check gpu-tests "$WORK/gpu_tests.xml" "$rc" "$nccl_rc" "$res/gpu_tests.result.json"
  [ "$nccl_rc" -eq 0 ] || return 1
  if [ "$DRY" = 1 ]; then [ "$rc" -eq 77 ]; return; fi  # a CPU-only or device-less build must skip, exit 77
  return "$rc"
}

stage_cpu_gpu_equivalence() {
  local data; data=$(corpus)
  local a=(--data "$data" "${small[@]}" --micro-batch 2 --global-batch 4 --steps "$STEPS_SHORT" --deterministic --log-every 1000)
  train 1 "$WORK/equiv/cpu" "${a[@]}" --device cpu
  train 1 "$WORK/equiv/dev" "${a[@]}" --device "$DEV" --precision "$HIGHP"
  verdict "$res/cpu_gpu_equivalence.result.json" "$WORK/equiv/dev/steps.rank0.jsonl" "$WORK/equiv/cpu/steps.rank0.jsonl" --rtol 1e-3
}

stage_shared_gpu_2rank() {
  local data; data=$(corpus)
  local a=(--data "$data" "${small[@]}" --micro-batch 2 --global-batch 4 --steps "$STEPS_SHORT" --device "$DEV" --precision "$HIGHP"
           --log-every 1000)
  train 1 "$WORK/shared/w1" "${a[@]}"
  train 2 "$WORK/shared/w2" "${a[@]}" --transport "$TRANSPORT"
  verdict "$res/shared_gpu_2rank.result.json" "$WORK/shared/w2/steps.rank0.jsonl" "$WORK/shared/w1/steps.rank0.jsonl" --rtol 1e-3
}

stage_deterministic_bitwise() {
  local data; data=$(corpus)
  local a=(--data "$data" "${small[@]}" --micro-batch 2 --global-batch 8 --steps "$STEPS_SHORT" --device "$DEV" --precision "$HIGHP"
           --deterministic --log-every 1000)
  train 1 "$WORK/det/w1" "${a[@]}"
  train 2 "$WORK/det/w2" "${a[@]}" --transport "$TRANSPORT"
  verdict "$res/deterministic_bitwise.result.json" "$WORK/det/w2/params.h5" "$WORK/det/w1/params.h5"
  gpu_check expect-verdict "$res/deterministic_bitwise.result.json" BITWISE
}

stage_resume_cross_device() {
  local data; data=$(corpus)
  local half=$((STEPS_SHORT / 2))
  local a=(--data "$data" "${small[@]}" --micro-batch 2 --global-batch 4 --deterministic --log-every 1000)
  local r="$WORK/resume"
  train 1 "$r/cpu_full" "${a[@]}" --steps "$STEPS_SHORT" --device cpu
  # device first half -> cpu second half
  train 1 "$r/dev_cpu" "${a[@]}" --steps "$half" --ckpt-every "$half" --device "$DEV" --precision "$HIGHP"
  train 1 "$r/dev_cpu" "${a[@]}" --steps "$STEPS_SHORT" --resume auto --device cpu
  # cpu first half -> device second half
  train 1 "$r/cpu_dev" "${a[@]}" --steps "$half" --ckpt-every "$half" --device cpu
  train 1 "$r/cpu_dev" "${a[@]}" --steps "$STEPS_SHORT" --resume auto --device "$DEV" --precision "$HIGHP"
  # a low-precision device checkpoint resumes on the cpu (fp32 logical tensors)
  train 1 "$r/low_cpu" "${a[@]}" --steps "$half" --ckpt-every "$half" --device "$DEV" --precision "$LOWP"
  train 1 "$r/low_cpu" "${a[@]}" --steps "$STEPS_SHORT" --resume auto --device cpu
  local rc=0
  verdict "$r/dev_cpu.json" "$r/dev_cpu/params.h5" "$r/cpu_full/params.h5" --rtol 1e-3 --atol 1e-5 || rc=1
  verdict "$r/cpu_dev.json" "$r/cpu_dev/params.h5" "$r/cpu_full/params.h5" --rtol 1e-3 --atol 1e-5 || rc=1
  gpu_check resume "$r" "$res/resume_cross_device.result.json"
  return "$rc"
}

stage_bf16_vs_fp32() {
  local data cutoff; data=$(corpus)
  # The hold-out: fortunes after 2019 (as scripts/demo.sh), or the Markov set's last days.
  cutoff=2019-01-01T00:00:00Z
  [ "$data" = "$WORK/data/markov.h5" ] && cutoff=2024-02-20T00:00:00Z
  local a=(--data "$data" --cutoff "$cutoff" "${small[@]}" --micro-batch 8 --global-batch 8
           --steps "$STEPS_BF16" --warmup "$WARMUP" --lr 2e-3 --eval-samples 128 --log-every 1000
           --device "$DEV" --deterministic)
  train 1 "$WORK/prec/fp32" "${a[@]}" --precision "$HIGHP"
  train 1 "$WORK/prec/low" "${a[@]}" --precision "$LOWP"
  gpu_check bf16-vs-fp32 "$WORK/prec" "$WARMUP" "$data" "$res/bf16_vs_fp32.result.json"
}

stage_gpt2_124m() {
  train 1 "$WORK/gpt2" --data "$WORK/data/markov.h5" "${gpt2[@]}" --steps "$GPT2_STEPS" --warmup 2 --log-every 10 \
    --device "$DEV" --precision "$LOWP" --eval-samples 2
  gpu_check gpt2 "$WORK/gpt2/summary.json" "$res/gpt2_124m.result.json"
}

stage_cpu_scaling() {
  local data; data=$(corpus)
  local rc=0
  "$BIN/scale-bench" run --workers "$SCALE_WORKERS" --out "$WORK/scaling" -- --data "$data" "${small[@]}" \
    --micro-batch 8 --global-batch 8 --steps "$SCALE_STEPS" --device cpu --log-every 1000 || rc=$?
  gpu_check cpu-scaling "$WORK/scaling" "$SCALE_WORKERS" "$rc" "$res/cpu_scaling.result.json"
}

export -f stage_env stage_build stage_bundle stage_data stage_gpu_tests stage_cpu_gpu_equivalence stage_shared_gpu_2rank \
  stage_deterministic_bitwise stage_resume_cross_device stage_bf16_vs_fp32 stage_gpt2_124m stage_cpu_scaling \
  gpu_check train verdict
# Arrays do not cross `bash -c`: pass them as declarations.
small_decl=$(declare -p small) gpt2_decl=$(declare -p gpt2)
export small_decl gpt2_decl

# record NAME STATUS SECONDS LIMIT RC REASON: the stage's JSON, with its result file folded in.
record() {
  gpu_check record "$res" "$@"
}

# summary.json from the stages' JSON: written at the end, and also when the part is interrupted
# (SIGTERM or SIGINT from an outer time limit), the stage then in flight marked "interrupted".
current="" summarized=0
write_summary() {
  [ "$summarized" = 0 ] || return 0
  summarized=1
  if [ -n "$current" ] && [ ! -f "$res/$current.json" ]; then
    record "$current" interrupted $((SECONDS - t0)) 0 143 "the part was stopped during this stage"
  fi
  gpu_check summary "$res" "$DRY" "$BUNDLE" "${ran[@]+"${ran[@]}"}"
  echo "gpu-check: results in $res (summary.json)"
}

if [ "$list" = 1 ]; then print_plan; exit 0; fi
mkdir -p "$res" "$WORK"
print_plan
start=$SECONDS t0=$SECONDS
failed=0
ran=()
trap write_summary EXIT
trap 'exit 143' TERM INT
for row in "${plan[@]}"; do
  IFS='|' read -r name parts limit _ <<<"$row"
  selected "$name" "$parts" || continue
  ran+=("$name")
  used=$((SECONDS - start))
  if [ $((used + limit)) -gt "$PART_BUDGET_S" ]; then
    echo "== $name: skipped (needs up to ${limit}s, ${used}s of the ${PART_BUDGET_S}s part budget used)"
    record "$name" skipped 0 "$limit" 0 "part budget: ${used}s used of ${PART_BUDGET_S}s"
    continue
  fi
  echo "== $name (limit ${limit}s)"
  t0=$SECONDS rc=0 current=$name
  timeout -k 10 "$limit" bash -c "set -euo pipefail; eval \"\$small_decl\"; eval \"\$gpt2_decl\"; stage_$name" \
    >"$res/$name.log" 2>&1 || rc=$?
  secs=$((SECONDS - t0))
  if [ "$rc" -eq 0 ]; then status=pass reason=""
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then status=timeout reason="over its ${limit}s limit"; failed=1
  else status=fail reason="exit $rc: see $res/$name.log"; failed=1
  fi
  record "$name" "$status" "$secs" "$limit" "$rc" "$reason"
  current=""
  echo "   $status in ${secs}s$([ -n "$reason" ] && echo ": $reason")"
  if [ "$status" != pass ]; then tail -5 "$res/$name.log" | sed 's/^/   | /'; fi
  if [ "$name" = build ] && [ "$status" != pass ]; then
    echo "== the build failed: the remaining stages need it; stopping"
    break
  fi
done
write_summary
exit $failed
