#!/usr/bin/env bash
# Data-parallel training under a real `mpirun -np 2` (issue 16):
#   1. the library: DataParallel against one process in float64 and float32, and the overlap
#      (tests/mpi/dp_check.cpp);
#   2. equivalence: train_sequence, train_gpt (a GPT, a llama-tiny and a LoRA fine-tune of it)
#      and train_seq2seq with -np 2 against one process, same global batch, 20 updates: every
#      parameter within 1e-5 relative, the metrics (loss curves) too;
#   3. determinism: the same -np 2 command twice gives the same metrics log (every field but the
#      two wall-clock ones, tokens_per_s and elapsed_s) and bit-identical checkpoints;
#   4. resume: a -np 2 run stopped with SIGINT (sent to one rank only: the ranks agree to stop
#      after the same update) and resumed with -np 2 ends bit for bit where the uninterrupted
#      run ends; resumed in one process it ends within float tolerance;
#   5. faults: a data file missing on one rank ends the job within seconds, non-zero, with that
#      rank's message; a rank killed while rank 0 saves a checkpoint every update leaves a
#      checkpoint that resumes.
#   tests/mpi/run_dp_checks.sh MPIRUN DP_CHECK TRAIN_SEQUENCE TRAIN_GPT TRAIN_SEQ2SEQ
set -u
mpirun=$1
check=$2
seq=$3
gpt=$4
s2s=$5
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
np2() { timeout 120 "$mpirun" --oversubscribe -np 2 "$@"; }
enter_scratch_dir "${DP_CHECK_KEEP:-}"

# --- 1. the library --------------------------------------------------------------------------
out=$(np2 "$check" 2>&1) || fail "mpirun -np 2 dp_check: $out"
[ "$(grep -c ': ok$' <<<"$out")" -eq 2 ] || fail "dp_check: $out"
grep -v ': ok$' <<<"$out"

# --- 2. equivalence --------------------------------------------------------------------------
# SGD for the comparisons with a tolerance: see dp_check.cpp on why Adam cannot be held to one.
BASE=(--task sort --vocab 12 --length 10 --d-model 32 --heads 4 --d-ff 64 --layers 2 --warmup 5
      --optimizer sgd --momentum 0.9 --lr 0.05 --eval-sequences 256 --quiet)
SEQ=("${BASE[@]}" --batch 16 --eval-every 5)
np2 "$seq" "${SEQ[@]}" --steps 20 --save s2.st --log s2.jsonl --plot s2.svg >s2.out 2>&1 || fail "-np 2 train_sequence: $(cat s2.out)"
"$seq" "${SEQ[@]}" --steps 20 --save s1.st --log s1.jsonl --plot s1.svg >s1.out 2>&1 || fail "train_sequence: $(cat s1.out)"
grep -q "data parallel: 2 processes" s2.out || fail "the -np 2 run does not report its data parallelism: $(cat s2.out)"
[ "$(grep -c 'held-out (' s2.out)" -eq 1 ] || fail "-np 2: the summary must be printed once (rank 0 only): $(cat s2.out)"
out=$("$check" --compare-params s2.st s1.st 1e-5) || fail "train_sequence: -np 2 and one process differ: $out"
echo "$out"
# Bit-identical would mean each rank trained the whole batch: the sums' order must show.
grep -q "largest relative difference 0 " <<<"$out" && fail "-np 2 and one process agree bit for bit: was the batch split?"
"$check" --compare-metrics s2.jsonl s1.jsonl 1e-5 || fail "train_sequence: the loss curves differ"
echo "ok: train_sequence -np 2 == one process (parameters and metrics within 1e-5)"

seq 1 4000 | tr '\n' ' ' >text.txt
GPT=(--data text.txt --layers 1 --d-model 32 --heads 2 --block-size 16 --batch 8 --warmup 5 --eval-every 10 --quiet)
np2 "$gpt" "${GPT[@]}" --steps 20 --save g2.st --log g2.jsonl --plot g2.svg >g2.out 2>&1 || fail "-np 2 train_gpt: $(cat g2.out)"
"$gpt" "${GPT[@]}" --steps 20 --save g1.st --log g1.jsonl --plot g1.svg >g1.out 2>&1 || fail "train_gpt: $(cat g1.out)"
grep -q "data parallel: 2 processes" g2.out || fail "the -np 2 GPT run does not report its data parallelism: $(cat g2.out)"
# This run keeps train_gpt's default optimizer, AdamW. The key projection's bias has an exact gradient of 0
# (softmax ignores a shift shared by all keys); AdamW turns its rounding noise into steps of
# about lr, so its value is noise in one process too and is left out of the comparison.
"$check" --compare-params g2.st g1.st 1e-5 attn.w_k.bias || fail "train_gpt: -np 2 and one process differ"
"$check" --compare-metrics g2.jsonl g1.jsonl 1e-5 || fail "train_gpt: the loss curves differ"
echo "ok: train_gpt -np 2 == one process (parameters and metrics within 1e-5)"

# The Llama family through the same job and loop: llama-tiny, byte tokens, a window of 16. With
# SGD and momentum, so that the parameters compare the averaged gradients themselves: AdamW divides
# each step by the gradient's running size, which makes the rounding of a near-zero gradient a step
# of about lr (the GPT check above leaves its key bias out for that reason; here 20 AdamW steps move
# an element of o_proj by 1.6e-5 of the tensor's largest value between the two runs).
LLAMA=(--data text.txt --preset llama-tiny --block-size 16 --batch 8 --warmup 5 --eval-every 10 --quiet
  --optimizer sgd --momentum 0.9 --lr 0.1)
np2 "$gpt" "${LLAMA[@]}" --steps 20 --save l2.st --log l2.jsonl --plot l2.svg >l2.out 2>&1 || fail "-np 2 llama-tiny: $(cat l2.out)"
"$gpt" "${LLAMA[@]}" --steps 20 --save l1.st --log l1.jsonl --plot l1.svg >l1.out 2>&1 || fail "llama-tiny: $(cat l1.out)"
grep -q "data parallel: 2 processes" l2.out || fail "the -np 2 Llama run does not report its data parallelism: $(cat l2.out)"
out=$("$check" --compare-params l2.st l1.st 1e-5) || fail "train_gpt --preset llama-tiny: -np 2 and one process differ: $out"
grep -q "largest relative difference 0 " <<<"$out" && fail "llama-tiny -np 2 and one process agree bit for bit: was the batch split?"
"$check" --compare-metrics l2.jsonl l1.jsonl 1e-5 || fail "train_gpt --preset llama-tiny: the loss curves differ"
echo "ok: train_gpt --preset llama-tiny -np 2 == one process (parameters and metrics within 1e-5)"

# Fine-tuning it with LoRA from that checkpoint: the adapters of -np 2 and one process agree.
TUNE=(--data text.txt --init-from l1.st --lora-rank 4 --block-size 16 --batch 8 --warmup 5 --eval-every 10 --quiet
  --optimizer sgd --momentum 0.9 --lr 0.1 --steps 20)
np2 "$gpt" "${TUNE[@]}" --save t2.st --log t2.jsonl --plot t2.svg >t2.out 2>&1 || fail "-np 2 LoRA on llama-tiny: $(cat t2.out)"
"$gpt" "${TUNE[@]}" --save t1.st --log t1.jsonl --plot t1.svg >t1.out 2>&1 || fail "LoRA on llama-tiny: $(cat t1.out)"
out=$("$check" --compare-params t2.st t1.st 1e-5) || fail "LoRA on llama-tiny: -np 2 and one process differ: $out"
"$check" --compare-metrics t2.jsonl t1.jsonl 1e-5 || fail "LoRA on llama-tiny: the loss curves differ"
echo "ok: train_gpt --init-from a llama-tiny --lora-rank 4 -np 2 == one process (parameters and metrics within 1e-5)"

# Gradient accumulation over two processes: each rank's 4 rows in 2 micro-batches of 2, with one
# gradient exchange per update (the report counts them), give the one-process run's update.
np2 "$gpt" "${GPT[@]}" --steps 20 --grad-accum 2 --save a2.st --log a2.jsonl --plot a2.svg >a2.out 2>&1 ||
  fail "-np 2 train_gpt --grad-accum 2: $(cat a2.out)"
grep -q "data parallel: 2 processes, 20 gradient exchanges of" a2.out ||
  fail "-np 2 --grad-accum 2 must exchange gradients once per update (20): $(grep 'data parallel' a2.out)"
grep -q "2 micro-batches per update" a2.out || fail "the description does not show the micro-batches: $(cat a2.out)"
"$check" --compare-params a2.st g1.st 1e-5 attn.w_k.bias || fail "train_gpt: -np 2 --grad-accum 2 and one process differ"
"$check" --compare-metrics a2.jsonl g1.jsonl 1e-5 || fail "train_gpt --grad-accum 2: the loss curves differ"
echo "ok: train_gpt -np 2 --grad-accum 2 == one process, one exchange per update"

# Activation recompute under two processes: the gradient exchange starts from the hooks of the
# parameters, which a recomputed block must fire once, after its own backward pass. The same
# bits as the plain -np 2 run, still one exchange per update.
np2 "$gpt" "${GPT[@]}" --steps 20 --grad-accum 2 --recompute --save r2.st --log r2.jsonl --plot r2.svg >r2.out 2>&1 ||
  fail "-np 2 train_gpt --grad-accum 2 --recompute: $(cat r2.out)"
grep -q "data parallel: 2 processes, 20 gradient exchanges of" r2.out ||
  fail "-np 2 --recompute must exchange gradients once per update (20): $(grep 'data parallel' r2.out)"
out=$("$check" --compare-params r2.st a2.st 0) || fail "train_gpt -np 2: --recompute changes the parameters: $out"
grep -q "largest relative difference 0 " <<<"$out" || fail "train_gpt -np 2 --recompute is not bit-identical: $out"
[ "$(untimed r2.jsonl)" = "$(untimed a2.jsonl)" ] || fail "train_gpt -np 2 --recompute: the metrics differ"
echo "ok: train_gpt -np 2 --grad-accum 2 --recompute == without it, bit for bit"

# Variable-length pairs: each rank's mean over its own target tokens must be weighted by its
# share of the batch's tokens, or the average over ranks is not the batch's mean (leaving the
# weights out moves the parameters by 3e-2 here). A program that ignored the communicator would
# print no data-parallel report and end bit for bit on the one-process parameters.
S2S=(--task sort-var --symbols 8 --min-len 1 --max-len 8 --d-model 32 --heads 4 --d-ff 64 --encoder-layers 1
     --decoder-layers 1 --warmup 5 --optimizer sgd --momentum 0.9 --lr 0.05 --batch 16 --eval-every 5
     --eval-sequences 128 --quiet)
np2 "$s2s" "${S2S[@]}" --steps 20 --save q2.st --log q2.jsonl --plot q2.svg >q2.out 2>&1 || fail "-np 2 train_seq2seq: $(cat q2.out)"
"$s2s" "${S2S[@]}" --steps 20 --save q1.st --log q1.jsonl --plot q1.svg >q1.out 2>&1 || fail "train_seq2seq: $(cat q1.out)"
grep -q "data parallel: 2 processes" q2.out || fail "the -np 2 seq2seq run does not report its data parallelism: $(cat q2.out)"
[ "$(grep -c 'held-out (' q2.out)" -eq 1 ] || fail "-np 2 seq2seq: the summary must be printed once (rank 0 only): $(cat q2.out)"
out=$("$check" --compare-params q2.st q1.st 1e-5) || fail "train_seq2seq: -np 2 and one process differ: $out"
echo "$out"
grep -q "largest relative difference 0 " <<<"$out" && fail "seq2seq -np 2 and one process agree bit for bit: was the batch split?"
"$check" --compare-metrics q2.jsonl q1.jsonl 1e-5 || fail "train_seq2seq: the loss curves differ"
echo "ok: train_seq2seq -np 2 == one process (parameters and metrics within 1e-5)"

# An odd global batch cannot be split over 2 ranks: a clear error, no hang.
out=$(np2 "$seq" "${BASE[@]}" --batch 15 --steps 20 --log odd.jsonl --plot odd.svg 2>&1)
rc=$?
{ [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q -- "--batch 15 (the global batch) cannot be split evenly over 2" <<<"$out"; } ||
  fail "--batch 15 over 2 ranks: exit $rc: $out"
echo "ok: --batch 15 over 2 ranks is refused by name"

# --- 3. determinism --------------------------------------------------------------------------
np2 "$seq" "${SEQ[@]}" --steps 20 --save s2b.st --log s2b.jsonl --plot s2b.svg >s2b.out 2>&1 || fail "-np 2 again: $(cat s2b.out)"
cmp <(untimed s2.jsonl) <(untimed s2b.jsonl) || fail "two -np 2 runs wrote different metrics: $(diff s2.jsonl s2b.jsonl)"
"$check" --compare-params s2.st s2b.st 0 >/dev/null || fail "two -np 2 runs ended with different checkpoints"
echo "ok: the same -np 2 command twice: the same metrics and checkpoint, bit for bit"

# --- 4. resume -------------------------------------------------------------------------------
LONG=("${BASE[@]}" --batch 16 --steps 300 --eval-every 10)
np2 "$seq" "${LONG[@]}" --save u.st --log u.jsonl --plot u.svg >u.out 2>&1 || fail "uninterrupted -np 2 run: $(cat u.out)"
timeout 120 "$mpirun" --oversubscribe -np 2 "$seq" "${LONG[@]}" --save r.st --log r.jsonl --plot r.svg >r.out 2>&1 &
job=$!
wait_rows r.jsonl 2
rank1=$(rank_pid $job 1)
[ -n "$rank1" ] || fail "no process of rank 1 found under mpirun"
kill -INT "$rank1"
wait $job
rc=$?
[ $rc -eq 130 ] || fail "a SIGINT to one rank must stop both after the same update with exit 130, got $rc: $(cat r.out)"
cp r.st r1.st
cp r.jsonl r1.jsonl
np2 "$seq" --resume r.st --save r.st --eval-every 10 --eval-sequences 256 --log r.jsonl --plot r.svg --quiet >r2.out 2>&1 ||
  fail "resume with -np 2: $(cat r2.out)"
stopped=$(sed -n -E 's/^resumed r.st at step ([0-9]+)$/\1/p' r2.out)
{ [ -n "$stopped" ] && [ "$stopped" -lt 300 ]; } || fail "the run was not stopped before its end: $(cat r2.out)"
"$check" --compare-params u.st r.st 0 || fail "stopped at step $stopped and resumed with -np 2: not the uninterrupted run"
cmp <(untimed u.jsonl) <(untimed r.jsonl) || fail "resumed -np 2 metrics differ from the uninterrupted run's"
"$seq" --resume r1.st --save r1.st --eval-every 10 --eval-sequences 256 --log r1.jsonl --plot r1.svg --quiet >r1.out 2>&1 ||
  fail "resume in one process: $(cat r1.out)"
# The one-process leg sums each batch in another order for up to 280 updates. Its loss curve
# stays within 1e-7 of the -np 2 run's, but single weights drift further: 1.8e-5 of their
# tensor's largest value when stopped at step 31 or 65, 1e-6 at step 91 (one float32 kernel
# change moved the step-31 case from under 1e-5 to over it). 1e-4 bounds that drift; the same
# checkpoint resumed with its momentum zeroed ends 0.31 away.
"$check" --compare-params u.st r1.st 1e-4 || fail "stopped at step $stopped and resumed in one process: too far from the -np 2 run"
# The same drift can flip a held-out prediction near a tie (seen: one token of 2560 at step
# 260), which moves an accuracy by 1/2560 or 1/256, far past 1e-5 relative. Losses, learning
# rate and gradient norm stay held to 1e-5; the accuracies may differ by one sequence, 1/256.
"$check" --compare-metrics u.jsonl r1.jsonl 1e-5 0.00390625 || fail "resumed in one process: the metrics drift from the -np 2 run's"
echo "ok: -np 2 stopped at step $stopped and resumed with -np 2 == uninterrupted, bit for bit; resumed in one process: close"

# --- 5. faults -------------------------------------------------------------------------------
start=$(date +%s)
out=$(np2 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then d=missing.txt; else d=text.txt; fi
                 exec "$0" --data "$d" --layers 1 --d-model 32 --heads 2 --block-size 16 --batch 8 --steps 50 \
                   --warmup 5 --log f.jsonl --plot f.svg --quiet' "$gpt" 2>&1)
rc=$?
elapsed=$(($(date +%s) - start))
{ [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $elapsed -le 30 ]; } || fail "a data file missing on rank 1: exit $rc after ${elapsed}s: $out"
grep -q "attograd: rank 1 of 2: train_gpt: error: .*missing.txt" <<<"$out" || fail "rank 1's message is missing: $out"
echo "ok: a data file missing on rank 1 ended the job in ${elapsed}s with exit $rc and rank 1's message"

timeout 120 "$mpirun" --oversubscribe -np 2 "$seq" "${BASE[@]}" --batch 16 --steps 100000 --eval-every 1 \
  --save k.st --log k.jsonl --plot k.svg >k.out 2>&1 &
job=$!
wait_rows k.jsonl 20
rank1=$(rank_pid $job 1)
[ -n "$rank1" ] || fail "no process of rank 1 found under mpirun"
start=$(date +%s)
kill -KILL "$rank1"
wait $job
rc=$?
elapsed=$(($(date +%s) - start))
{ [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $elapsed -le 30 ]; } || fail "rank 1 killed: exit $rc after ${elapsed}s: $(cat k.out)"
# The checkpoint rank 0 was rewriting every update must still load and train on.
timeout 60 "$seq" --resume k.st --save k.st --eval-every 1 --eval-sequences 16 --log k.jsonl --plot k.svg --quiet >k1.out 2>&1 &
resumed=$!
wait_rows k1.out 1
for _ in $(seq 1 50); do
  grep -q "resumed k.st at step" k1.out && break
  sleep 0.1
done
kill -INT $resumed 2>/dev/null
wait $resumed
rc2=$?
{ [ $rc2 -eq 130 ] || [ $rc2 -eq 0 ]; } && grep -q "resumed k.st at step" k1.out ||
  fail "the checkpoint saved while rank 1 died does not resume (exit $rc2): $(cat k1.out)"
echo "ok: rank 1 killed while rank 0 saved every update: the job ended in ${elapsed}s (exit $rc); the checkpoint resumes"
