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
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
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
  python3 - "$res/env.result.json" <<'PY'
import json, os, shutil, subprocess, sys
def run(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception as e:
        return f"unavailable ({e.__class__.__name__})"
out = {
    "gpus": run("nvidia-smi", "-L") if shutil.which("nvidia-smi") else "no nvidia-smi",
    "nvcc": run("/usr/local/cuda/bin/nvcc", "--version").splitlines()[-1:] if os.path.exists("/usr/local/cuda/bin/nvcc") else "no nvcc",
    "nccl_header": os.path.exists("/usr/local/cuda/include/nccl.h"),
    "cpus": os.cpu_count(),
    "tools": {t: bool(shutil.which(t)) for t in ["cmake", "mpirun", "h5dump", "gnuplot", "nvidia-smi"]},
    "dry_run": os.environ.get("DRY") == "1",
    "bundle": os.environ.get("BUNDLE") or None,
}
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(json.dumps(out, indent=1))
PY
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
  python3 - "$WORK/configure.log" "$res/build.result.json" <<'PY'
import json, sys
log = open(sys.argv[1]).read()
json.dump({"built": True, "cuda_on": "CUDA backend ON" in log, "nccl_on": "NCCL transport ON" in log},
          open(sys.argv[2], "w"))
PY
  grep -q "CUDA backend ON" "$WORK/configure.log"
}

# The bundle in place of a build: every file as the manifest says, the launcher's report, and the
# paths compiled into shardtrain_tests (its test data, the tools) linked to the bundle's copies.
stage_bundle() {
  "$BUNDLE/launch" --report | tee "$WORK/launch-report.txt"
  python3 - "$BUNDLE" "$WORK/launch-report.txt" "$res/build.result.json" <<'PY'
import hashlib, json, os, sys
B, report, out = sys.argv[1:4]
m = json.load(open(f"{B}/manifest.json"))
bad = []
for f in m["files"]:
    p = os.path.join(B, f["path"])
    if "link" in f:
        ok = os.path.islink(p) and os.readlink(p) == f["link"]
    else:
        ok = os.path.isfile(p) and hashlib.sha256(open(p, "rb").read()).hexdigest() == f["sha256"]
    if not ok:
        bad.append(f["path"])
linked = []
for key, sub in (("testdata", "testdata"), ("bin", "bin")):
    want = m["compiled_paths"][key]
    if not os.path.exists(want):
        os.makedirs(os.path.dirname(want), exist_ok=True)
        os.symlink(os.path.join(B, sub), want)
        linked.append(want)
lines = open(report).read().splitlines()
r = {"built": False, "bundle": B, "code_version": m["code_version"], "files": len(m["files"]), "sha256_mismatch": bad,
     "device_libraries": [l.strip() for l in lines if ".so." in l], "compiled_paths_linked": linked,
     "all_device_libraries_found": any("all " in l and "found" in l for l in lines)}
json.dump(r, open(out, "w"), indent=1)
print(json.dumps(r, indent=1))
sys.exit(1 if bad else 0)
PY
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
  python3 - "$FORTUNES" "$WORK/data/markov.h5" "$res/data.result.json" <<'PY'
import json, os, sys
json.dump({"fortunes": sys.argv[1] if os.path.exists(sys.argv[1]) else None, "markov": sys.argv[2]},
          open(sys.argv[3], "w"))
PY
}

# The corpus for the training stages: fortunes when present, else the Markov set (said in the JSON).
corpus() { if [ -f "$FORTUNES" ]; then echo "$FORTUNES"; else echo "$WORK/data/markov.h5"; fi; }
export -f corpus

stage_gpu_tests() {
  local rc=0
  "$BUILD/tests/shardtrain_tests" "[gpu]" -r junit -o "$WORK/gpu_tests.xml" || rc=$?
  local nccl_rc=0
  "$BUILD/tests/shardtrain_tests" "[nccl]" || nccl_rc=$?
  python3 - "$WORK/gpu_tests.xml" "$rc" "$nccl_rc" "$res/gpu_tests.result.json" <<'PY'
import json, os, sys
import xml.etree.ElementTree as ET
path, rc, nccl_rc, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
r = {"exit_code": rc, "nccl_exit_code": nccl_rc, "skipped_no_device": rc == 77}
if os.path.exists(path) and os.path.getsize(path) > 0:
    root = ET.parse(path).getroot()
    cases = root.iter("testcase")
    r["cases"] = [{"name": c.get("name"), "failed": c.find("failure") is not None or c.find("error") is not None}
                  for c in cases]
json.dump(r, open(out, "w"), indent=1)
print(json.dumps(r, indent=1))
PY
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
  [ "$(json "$res/deterministic_bitwise.result.json" 'd["verdict"]')" = BITWISE ]
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
  python3 - "$r" "$res/resume_cross_device.result.json" <<'PY'
import json, sys
r = sys.argv[1]
out = {k: json.load(open(f"{r}/{k}.json"))["verdict"] for k in ("dev_cpu", "cpu_dev")}
out["low_precision_checkpoint_resumed_on_cpu"] = json.load(open(f"{r}/low_cpu/summary.json"))["final_loss"]
json.dump(out, open(sys.argv[2], "w"), indent=1)
print(json.dumps(out, indent=1))
PY
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
  python3 - "$WORK/prec" "$WARMUP" "$data" "$res/bf16_vs_fp32.result.json" <<'PY'
import json, sys
d, warmup, data, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def losses(run):
    return [json.loads(l)["loss"] for l in open(f"{d}/{run}/steps.rank0.jsonl")]
hi, lo = losses("fp32"), losses("low")
assert len(hi) == len(lo) and hi, (len(hi), len(lo))
rel = [abs(b - a) / abs(a) for a, b in zip(hi, lo)]
after = rel[warmup:] or rel
sh = json.load(open(f"{d}/fp32/summary.json")); sl = json.load(open(f"{d}/low/summary.json"))
ho_hi = (sh.get("eval") or {}).get("holdout_loss"); ho_lo = (sl.get("eval") or {}).get("holdout_loss")
ho_rel = abs(ho_lo - ho_hi) / abs(ho_hi) if ho_hi and ho_lo else None
r = {"corpus": data, "steps": len(hi), "warmup": warmup, "precision": [sh["precision"], sl["precision"]],
     "max_rel_loss_diff_after_warmup": max(after), "worst_step": warmup + after.index(max(after)),
     "holdout_loss": [ho_hi, ho_lo], "holdout_rel_diff": ho_rel,
     "loss_within_2pct": max(after) <= 0.02, "holdout_within_1pct": ho_rel is not None and ho_rel <= 0.01,
     "throughput_tokens_per_s": [sh["throughput_tokens_per_s"], sl["throughput_tokens_per_s"]]}
json.dump(r, open(out, "w"), indent=1)
print(json.dumps(r, indent=1))
sys.exit(0 if r["loss_within_2pct"] and r["holdout_within_1pct"] else 1)
PY
}

stage_gpt2_124m() {
  train 1 "$WORK/gpt2" --data "$WORK/data/markov.h5" "${gpt2[@]}" --steps "$GPT2_STEPS" --warmup 2 --log-every 10 \
    --device "$DEV" --precision "$LOWP" --eval-samples 2
  python3 - "$WORK/gpt2/summary.json" "$res/gpt2_124m.result.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
m = s["config"]["model"]
L, C, T = m["n_layer"], m["d_model"], m["seq_len"]
N = s["parameters"]
flops = 6 * N + 12 * L * T * C  # the formula, independently of the trainer's flops_per_token
r = {"parameters": N, "layers": L, "d_model": C, "seq_len": T, "vocab": m["vocab"], "precision": s["precision"],
     "device": s["device_name"], "tokens_per_s": s["throughput_tokens_per_s"], "median_step_s": s["median_step_s"],
     "flops_per_token_6N_12LTC": flops, "flops_per_token_trainer": s["flops_per_token"],
     "peak_measured_flops": s["peak_flops_per_rank"], "peak_datasheet_flops": s["peak_flops_datasheet_per_rank"],
     "mfu_vs_measured_peak": s["throughput_tokens_per_s"] * flops / s["peak_flops_per_rank"],
     "mfu_vs_datasheet_peak": (s["throughput_tokens_per_s"] * flops / s["peak_flops_datasheet_per_rank"]
                               if s["peak_flops_datasheet_per_rank"] else None),
     "target_mfu_vs_datasheet": 0.45}
json.dump(r, open(sys.argv[2], "w"), indent=1)
print(json.dumps(r, indent=1))
PY
}

stage_cpu_scaling() {
  local data; data=$(corpus)
  local rc=0
  "$BIN/scale-bench" run --workers "$SCALE_WORKERS" --out "$WORK/scaling" -- --data "$data" "${small[@]}" \
    --micro-batch 8 --global-batch 8 --steps "$SCALE_STEPS" --device cpu --log-every 1000 || rc=$?
  python3 - "$WORK/scaling" "$SCALE_WORKERS" "$rc" "$res/cpu_scaling.result.json" <<'PY'
import json, os, sys
d, workers, rc, out = sys.argv[1], [int(w) for w in sys.argv[2].split(",")], int(sys.argv[3]), sys.argv[4]
rows = {}
for w in workers:
    p = f"{d}/w{w}/summary.json"
    if os.path.exists(p):
        rows[w] = json.load(open(p))["throughput_tokens_per_s"]
base = rows.get(workers[0])
table = [{"workers": w, "tokens_per_s": t, "speedup": t / base if base else None,
          "efficiency": t / (w / workers[0] * base) if base else None, "oversubscribed": w > os.cpu_count()}
         for w, t in sorted(rows.items())]
r = {"scale_bench_exit": rc, "report_json": f"{d}/report.json" if os.path.exists(f"{d}/report.json") else None,
     "cpus": os.cpu_count(), "table": table}
json.dump(r, open(out, "w"), indent=1)
print(json.dumps(r, indent=1))
sys.exit(0 if len(rows) == len(workers) else 1)
PY
}

export -f stage_env stage_build stage_bundle stage_data stage_gpu_tests stage_cpu_gpu_equivalence stage_shared_gpu_2rank \
  stage_deterministic_bitwise stage_resume_cross_device stage_bf16_vs_fp32 stage_gpt2_124m stage_cpu_scaling \
  json train verdict
# Arrays do not cross `bash -c`: pass them as declarations.
small_decl=$(declare -p small) gpt2_decl=$(declare -p gpt2)
export small_decl gpt2_decl

# record NAME STATUS SECONDS LIMIT RC REASON: the stage's JSON, with its result file folded in.
record() {
  python3 - "$res" "$@" <<'PY'
import json, os, sys
res, name, status, seconds, limit, rc, reason = sys.argv[1:8]
p = f"{res}/{name}.result.json"
result = None
if os.path.exists(p):
    try:
        result = json.load(open(p))
    except ValueError:
        result = {"unreadable": p}
doc = {"stage": name, "status": status, "seconds": float(seconds), "limit_s": int(limit), "exit_code": int(rc),
       "reason": reason, "log": f"{res}/{name}.log", "result": result}
json.dump(doc, open(f"{res}/{name}.json", "w"), indent=1)
PY
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
  python3 - "$res" "${ran[@]+"${ran[@]}"}" <<'PY'
import json, os, sys
res, names = sys.argv[1], sys.argv[2:]
stages = []
for n in names:
    p = f"{res}/{n}.json"
    if os.path.exists(p):
        d = json.load(open(p))
        stages.append({k: d[k] for k in ("stage", "status", "seconds", "reason")})
json.dump({"stages": stages, "dry_run": os.environ.get("DRY") == "1", "bundle": os.environ.get("BUNDLE") or None},
          open(f"{res}/summary.json", "w"), indent=1)
for s in stages:
    print(f"  {s['stage']:<22} {s['status']:<8} {s['seconds']:6.0f} s  {s['reason']}")
PY
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
