#!/usr/bin/env bash
# train_gpt's fine-tuning flags as a user meets them, comparing the checkpoints tensor by tensor:
#   --init-from a base, --lora-rank: after training every base tensor is bit-identical to the
#     base's, every adapter tensor changed (also with --grad-accum 2);
#   --freeze PATTERN (repeated): the tensors it names bit-identical, the others changed;
#   --save-adapter-only: a checkpoint of the adapters alone, at most 2% of a full fine-tuning
#     checkpoint's bytes for a model of 4 layers of d_model 384 with rank 8 on the attention
#     projections; stopped by a signal and resumed, it ends bit for bit where an uninterrupted run
#     ends; generate reads it, and refuses it once the base has changed;
#   bad input (a LoRA target that does not exist, rank 0, a rank above the layer's size, a
#     --freeze that names nothing, --save-adapter-only without a base): a message naming the
#     value, and nothing written.
#   train_gpt_fine_tunes.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
tensors="$source/tests/train/checkpoint_tensors.py"
for i in $(seq 1 150); do echo "line $i: the cat sat on the mat, and the dog ran after $((i * 7 % 13)) birds."; done >text.txt
gpt() { "$build/tools/train_gpt" --data text.txt --quiet "$@"; }
small=(--batch 4 --eval-windows 4)

gpt --layers 2 --d-model 32 --heads 2 --block-size 16 "${small[@]}" --steps 4 --eval-every 4 --save base.st \
  --log base.jsonl --plot base.svg >out.txt 2>&1 || { cat out.txt; fail "the base run failed"; finish; exit 1; }

# LoRA: only the adapters change.
gpt --init-from base.st --lora-rank 4 "${small[@]}" --steps 6 --eval-every 3 --save lora.st --log lora.jsonl \
  --plot lora.svg >out.txt 2>&1 || fail "the LoRA run failed: $(cat out.txt)"
grep -q "LoRA rank 4 alpha 4 on w_q w_k w_v w_o" out.txt || fail "the description does not say LoRA: $(cat out.txt)"
python3 "$tensors" base.st lora.st >cmp.txt
base_same=$(grep -c "^same " cmp.txt || true)
[ "$(grep -v optimizer/ cmp.txt | grep -v lora_ | grep -vc '^same ')" -eq 0 ] ||
  fail "a base tensor changed under LoRA: $(grep -v optimizer/ cmp.txt | grep -v lora_ | grep -v '^same ')"
[ "$(grep -c '^only-in-b blocks\.[01]\.attn\.w_[qkvo]\.lora_[ab]$' cmp.txt)" -eq 16 ] || fail "not 16 adapter tensors"
echo "LoRA: all $base_same parameters of the base bit-identical after training"
# The adapters trained: lora_b starts at zero, so a zero tensor would mean it never changed.
python3 "$tensors" --nonzero .lora_b lora.st || fail "an adapter's B is still zero"

# The same with gradient accumulation (two micro-batches per update).
gpt --init-from base.st --lora-rank 4 --grad-accum 2 "${small[@]}" --steps 4 --eval-every 4 --save accum.st \
  --log accum.jsonl --plot accum.svg >out.txt 2>&1 || fail "the LoRA run with --grad-accum 2 failed: $(cat out.txt)"
python3 "$tensors" base.st accum.st | grep -v optimizer/ | grep -v lora_ | grep -v "^same " &&
  fail "a base tensor changed under LoRA with --grad-accum 2"

# --freeze: what it names stays, the rest trains.
gpt --init-from base.st --freeze embed --freeze 'blocks.0.*' "${small[@]}" --steps 4 --eval-every 4 --save frozen.st \
  --log frozen.jsonl --plot frozen.svg >out.txt 2>&1 || fail "the --freeze run failed: $(cat out.txt)"
python3 "$tensors" base.st frozen.st | grep -v optimizer/ >cmp.txt
grep -E " (embed\.weight|blocks\.0\..*)$" cmp.txt | grep -v "^same " && fail "a frozen tensor changed"
grep -Ev " (embed\.weight|blocks\.0\..*)$" cmp.txt | grep "^same " >/dev/null && fail "an unfrozen tensor did not train"

# An adapter-only checkpoint against a full fine-tuning one, at a realistic width.
wide=(--batch 2 --eval-windows 2 --steps 1 --eval-every 1)
gpt --layers 4 --d-model 384 --heads 6 --block-size 64 "${wide[@]}" --save wide.st --log wide.jsonl --plot wide.svg \
  >out.txt 2>&1 || fail "the wide base failed: $(cat out.txt)"
gpt --init-from wide.st "${wide[@]}" --save full.st --log full.jsonl --plot full.svg >out.txt 2>&1 ||
  fail "the full fine-tune failed: $(cat out.txt)"
gpt --init-from wide.st --lora-rank 8 --save-adapter-only "${wide[@]}" --save adapter.st --log adapter.jsonl \
  --plot adapter.svg >out.txt 2>&1 || fail "the adapter-only run failed: $(cat out.txt)"
full=$(stat -c %s full.st)
adapter=$(stat -c %s adapter.st)
echo "adapter-only checkpoint: $adapter bytes, full fine-tuning checkpoint: $full bytes ($((adapter * 10000 / full)) / 10000)"
[ $((adapter * 50)) -le "$full" ] || fail "the adapter checkpoint is $adapter bytes, above 2% of $full"
python3 "$tensors" adapter.st adapter.st | grep -Ev "lora_[ab](/[a-z_]+)?$" && fail "the adapter checkpoint holds a base tensor"

# Adapter-only, stopped by a signal and resumed, against the uninterrupted run (SIGTERM: a
# background job of a script ignores SIGINT; train_gpt stops on either the same way).
long=(--init-from base.st --lora-rank 2 --lora-alpha 8 --lora-targets w_q w_v linear1 --save-adapter-only
      --batch 8 --eval-windows 2 --steps 400 --eval-every 20)
gpt "${long[@]}" --save straight.st --log straight.jsonl --plot straight.svg >out.txt 2>&1 ||
  fail "the uninterrupted adapter run failed: $(cat out.txt)"
"$build/tools/train_gpt" --data text.txt --quiet "${long[@]}" --save stopped.st --log stopped.jsonl \
  --plot stopped.svg >stopped.txt 2>&1 &
stop_when_logged TERM $! stopped.jsonl 2
grep -q "interrupted" stopped.txt || fail "the run was not interrupted: $(cat stopped.txt)"
gpt --resume stopped.st >resumed.txt 2>&1 || fail "the resume failed: $(cat resumed.txt)"
python3 "$tensors" straight.st stopped.st | grep -v "^same " && fail "the resumed adapter run differs from the uninterrupted one"
"$build/tools/generate" --checkpoint straight.st --prompt "line" --tokens 5 >gen.txt 2>&1 ||
  fail "generate could not read the adapter: $(cat gen.txt)"

# The base changes under the adapter: refused by name.
cp base.st base.keep
gpt --layers 2 --d-model 32 --heads 2 --block-size 16 "${small[@]}" --steps 2 --eval-every 2 --seed 9 --save base.st \
  --log base2.jsonl --plot base2.svg --overwrite >out.txt 2>&1 || fail "rewriting the base failed: $(cat out.txt)"
status=0
"$build/tools/generate" --checkpoint straight.st --prompt "line" >gen.txt 2>&1 || status=$?
[ "$status" -ne 0 ] && grep -q "another base" gen.txt || fail "an adapter on another base: exit $status, $(cat gen.txt)"
status=0
gpt --resume straight.st >out.txt 2>&1 || status=$?
[ "$status" -ne 0 ] && grep -q "another base" out.txt || fail "resuming on another base: exit $status, $(cat out.txt)"
cp base.keep base.st

# Bad input: a message naming the value; nothing written.
bad() {  # WHAT EXPECTED FLAGS...
  local what=$1 expected=$2
  shift 2
  local status=0
  gpt --init-from base.st "${small[@]}" --steps 2 --save bad/ckpt.st --log bad/m.jsonl --plot bad/p.svg "$@" \
    >out.txt 2>&1 || status=$?
  [ "$status" -ne 0 ] && grep -q -- "$expected" out.txt || fail "$what: exit $status, $(cat out.txt)"
  [ ! -e bad ] || fail "$what: something was written: $(ls -R bad)"
}
bad "a target that does not exist" "no Linear is named 'c_attn'" --lora-rank 2 --lora-targets c_attn
bad "rank 0" "--lora-rank" --lora-rank 0
bad "a rank above the layer" "rank 33" --lora-rank 33
bad "a --freeze that names nothing" "'blocks.7' names no parameter" --freeze blocks.7
bad "--save-adapter-only without LoRA or --freeze" "--save-adapter-only" --save-adapter-only
status=0
gpt "${small[@]}" --steps 2 --save-adapter-only --lora-rank 2 --save bad/c.st >out.txt 2>&1 || status=$?
[ "$status" -eq 2 ] && grep -q "needs --init-from" out.txt || fail "--save-adapter-only without a base: $(cat out.txt)"
finish
