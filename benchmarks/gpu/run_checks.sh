#!/usr/bin/env bash
# The GPU checks of issues 2, 3 and 5 as one prepared script for the `device` tool (one H200 run):
# the monitor around a matmul loop, the doctor on pin_memory/non_blocking/.item() variants, and
# `tune --transfer`. Writes everything under $OUT (or ./gpu-out). Needs torch with CUDA there.
set -u
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
$py -m supplyline monitor --interval 0.5 --log "$OUT/monitor.jsonl" -- $py -c "
import torch, time
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16); t = time.time()
while time.time() - t < 20: (a @ a).sum().item()
" > "$OUT/monitor.txt" 2>&1
for v in "0 0 1" "1 0 1" "1 1 1" "1 1 0"; do
  set -- $v
  $py -m supplyline doctor --quiet --steps 150 --out "$OUT/doctor-pin$1-nb$2-item$3" \
    benchmarks/gpu/train_transfer.py --pin $1 --non-blocking $2 --item $3 > /dev/null 2>&1
  $py - "$OUT/doctor-pin$1-nb$2-item$3" <<'PY' >> "$OUT/doctor.txt"
import json, sys
d = sys.argv[1]
r = json.load(open(d + "/report.json")); rec = json.load(open(d + "/record.json"))
t = rec["transfers"]; steps = max(r["steps"]["observed"], 1)
print(d.split("/")[-1], f"step {r['steps']['step_ms_median']:.2f} ms", f"transfer {r['phase_share']['transfer']*100:.1f}%",
      f"pinned {t['pinned']} pageable {t['pageable']} nb {t['non_blocking']}",
      f"GB/s {t['bytes']/max(t['seconds'],1e-9)/1e9:.1f}", f"syncs/step {rec['gpu'].get('syncs',0)/steps:.2f}", r["verdict"]["bound"])
PY
done
$py -m supplyline tune benchmarks/gpu/train_transfer.py:transfer_dataset --batch-size 256 --transfer --budget 30 \
  > "$OUT/tune_transfer.txt" 2>&1
cat "$OUT/doctor.txt"; tail -25 "$OUT/monitor.txt"; tail -15 "$OUT/tune_transfer.txt"
