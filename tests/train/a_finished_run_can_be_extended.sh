#!/usr/bin/env bash
# --resume CK --steps N, N above the checkpoint's budget, extends a finished run: with the constant
# schedule its checkpoint is bit for bit that of a run with the larger budget from the start, a
# cosine run's schedule ends at the new last step, and a budget that is not larger is refused.
#   a_finished_run_can_be_extended.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
seq=$build/tools/train_sequence
# sort over 64 symbols stays far from its target: every run uses its whole budget.
base=(--task sort --vocab 64 --length 32 --d-model 16 --heads 2 --d-ff 32 --layers 1 --batch 8 --warmup 2
  --eval-every 10 --eval-sequences 8 --target-acc 1 --quiet --threads 2)
tensors() {  # tensors CK: every tensor's bytes but the metadata (the clock differs between runs)
  /usr/bin/python3 -c '
import json, struct, sys, hashlib
b = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", b[:8])
h = json.loads(b[8:8 + n])
h.pop("__metadata__")
print(hashlib.sha256(b"".join(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for _, v in sorted(h.items()))).hexdigest())
' "$1"
}

"$seq" "${base[@]}" --schedule constant --steps 40 --save straight.ck >straight.out 2>&1 || fail "the 40-step run failed: $(cat straight.out)"
"$seq" "${base[@]}" --schedule constant --steps 20 --save extended.ck >first.out 2>&1 || fail "the 20-step run failed: $(cat first.out)"
if "$seq" --resume extended.ck --steps 40 --eval-sequences 8 --quiet --log e.jsonl --plot e.svg >second.out 2>&1; then
  grep -q "resumed extended.ck at step 20" second.out || fail "the extension does not say where it resumed: $(cat second.out)"
  [ "$(tensors extended.ck)" = "$(tensors straight.ck)" ] || fail "20 steps extended to 40 differ from 40 straight (constant schedule)"
  echo "ok: 20 steps extended to 40 are 40 steps straight, bit for bit"
else
  fail "--resume --steps 40 was refused: $(cat second.out)"
fi
# The extended checkpoint's budget is now 40: a --steps that is not above it is refused.
status=0
"$seq" --resume extended.ck --steps 40 --eval-sequences 8 --quiet --log e.jsonl --plot e.svg >same.out 2>&1 || status=$?
[ "$status" -eq 2 ] && grep -q -- "--steps 40 with --resume extends the run, so it must be above the checkpoint's budget of 40" same.out ||
  fail "--steps equal to the budget: exit $status, $(cat same.out)"
status=0
"$seq" --resume extended.ck --steps 30 --eval-sequences 8 --quiet --log e.jsonl --plot e.svg >fewer.out 2>&1 || status=$?
[ "$status" -eq 2 ] || fail "--steps below the budget: exit $status, not 2: $(cat fewer.out)"
# Cosine: after the extension the learning rate is the schedule's of the new budget, as a run of
# 30 steps from the start has it at step 30 (the metrics log's lr).
"$seq" "${base[@]}" --steps 20 --min-lr 1e-4 --save cosine.ck >c1.out 2>&1 || fail "cosine run: $(cat c1.out)"
"$seq" --resume cosine.ck --steps 30 --eval-sequences 8 --log c.jsonl --plot c.svg >c2.out 2>&1 || fail "cosine extension: $(cat c2.out)"
grep -q "after 30 steps (10 in this session)" c2.out || fail "the cosine extension did not run to 30: $(cat c2.out)"
"$seq" "${base[@]}" --steps 30 --min-lr 1e-4 --log straight30.jsonl --plot s.svg >c3.out 2>&1 || fail "30 straight: $(cat c3.out)"
lr_at_30() { sed -n 's/^{"step":30,.*"lr":\([^,]*\),.*/\1/p' "$1"; }
[ -n "$(lr_at_30 c.jsonl)" ] && [ "$(lr_at_30 c.jsonl)" = "$(lr_at_30 straight30.jsonl)" ] ||
  fail "the extended run's lr at step 30 is $(lr_at_30 c.jsonl), a 30-step run's $(lr_at_30 straight30.jsonl)"
echo "ok: refusals and the cosine extension"
finish
