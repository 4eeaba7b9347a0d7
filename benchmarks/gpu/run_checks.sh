#!/usr/bin/env bash
# The GPU checks as one prepared script for the `device` tool (one H200 run, about 6 minutes, at most 8):
# the gpu-marked tests; the monitor around a matmul loop, the doctor on pin_memory/non_blocking/.item()
# variants and `tune --transfer` (issues 2, 3, 5); then the planted GPU-idle jobs (issue 14), each run
# plainly, under torch.profiler (the truth), with supplyline's CudaTimeline (the cross-check) and under
# the doctor, summarised into $OUT/gpu_checks.json. Writes everything under $OUT (or ./gpu-out).
set -u
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
t() { timeout "$@" || echo "timed out or failed ($?): ${*:2:4}" >> "$OUT/failures.txt"; }
$py -c "import torch; assert torch.cuda.is_available(), 'no CUDA here'; print(torch.__version__, torch.cuda.get_device_name(0))" \
  > "$OUT/device.txt" 2>&1 || { cat "$OUT/device.txt"; exit 1; }
t 120 $py -m pytest -q -m gpu tests/gpu > "$OUT/pytest_gpu.txt" 2>&1
t 60 $py -m supplyline monitor --interval 0.5 --log "$OUT/monitor.jsonl" -- $py -c "
import torch, time
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16); t = time.time()
while time.time() - t < 20: (a @ a).sum().item()
" > "$OUT/monitor.txt" 2>&1
for v in "0 0 1" "1 0 1" "1 1 1" "1 1 0"; do
  set -- $v
  t 60 $py -m supplyline doctor --quiet --steps 150 --out "$OUT/doctor-pin$1-nb$2-item$3" \
    benchmarks/gpu/train_transfer.py --pin $1 --non-blocking $2 --item $3 > /dev/null 2>&1
  $py - "$OUT/doctor-pin$1-nb$2-item$3" <<'PY' >> "$OUT/doctor.txt"
import json, sys
d = sys.argv[1]
r = json.load(open(d + "/report.json")); rec = json.load(open(d + "/record.json"))
t = rec["transfers"]; steps = max(r["steps"]["observed"], 1)
tt = {k: t.get(k) for k in ("truly_async", "non_blocking_pageable", "stream_syncs")}
print(d.split("/")[-1], tt, f"step {r['steps']['step_ms_median']:.2f} ms", f"transfer {r['phase_share']['transfer']*100:.1f}%",
      f"pinned {t['pinned']} pageable {t['pageable']} nb {t['non_blocking']}",
      f"GB/s {t['bytes']/max(t['seconds'],1e-9)/1e9:.1f}", f"syncs/step {rec['gpu'].get('syncs',0)/steps:.2f}", r["verdict"]["bound"])
PY
done
t 60 $py -m supplyline tune benchmarks/gpu/train_transfer.py:transfer_dataset --batch-size 256 --transfer --budget 30 \
  > "$OUT/tune_transfer.txt" 2>&1
# Issue 14: GPU idle, doctor vs profiler vs CudaTimeline, on the planted jobs (60 steps each).
P=benchmarks/gpu/planted.py
for job in starved ahead pageable pinned item ckpt; do
  t 45 $py $P --job $job --stats "$OUT/$job-plain.json" > /dev/null 2>&1
  t 60 $py $P --job $job --profile "$OUT/$job-profile.json" > /dev/null 2>&1
  t 45 $py $P --job $job --timeline "$OUT/$job-timeline.json" > /dev/null 2>&1
  t 60 $py -m supplyline doctor --quiet --no-what-if --steps 60 --out "$OUT/doctor-$job" $P --job $job > /dev/null 2>&1
done
$py benchmarks/gpu/summarize.py "$OUT" > "$OUT/gpu_idle.txt" 2>&1
cat "$OUT/device.txt" "$OUT/pytest_gpu.txt" "$OUT/doctor.txt" "$OUT/gpu_idle.txt"
tail -25 "$OUT/monitor.txt"; tail -15 "$OUT/tune_transfer.txt"; cat "$OUT/failures.txt" 2>/dev/null
