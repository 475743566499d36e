#!/usr/bin/env bash
# The edges of a run over several processes (issue 27), under a real mpirun:
#   1. signals: SIGINT to mpirun (a Ctrl-C) stops both ranks after the same update, rank 0
#      saves at that step, and the run resumed with -np 2 ends bit for bit where the
#      uninterrupted run ends; SIGTERM to both ranks makes the job exit 143; SIGTERM and SIGHUP
#      to one process exit 143 and 129 with a checkpoint at the stop step;
#   2. agreement: one rank given another flag (`mpirun -np 1 A : -np 1 B`) is refused by name on
#      every rank, with both values, before training;
#   3. timeout: a SIGSTOPped rank ends the job within the limit (plus the second it gives the
#      others to answer), naming that rank; a rank stopped for less than the limit finishes;
#   4. a batch-16 checkpoint resumed on 3 processes is refused with the process counts that work.
#   tests/mpi/run_rank_checks.sh MPIRUN DP_CHECK TRAIN_SEQUENCE TRAIN_GPT
set -u
mpirun=$1
check=$2
seq=$3
gpt=$4
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
np() { timeout 120 "$mpirun" --oversubscribe "$@"; }
enter_scratch_dir "${RANK_CHECK_KEEP:-}"
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

seq 1 4000 | tr '\n' ' ' >text.txt
GPT=(--data text.txt --layers 1 --d-model 32 --heads 2 --block-size 16 --batch 8 --warmup 5 --quiet)

# --- 1. signals ------------------------------------------------------------------------------
# Many steps, evaluations far apart: without the stop's own save, everything would be lost.
# (A quiet machine trains 3000 of these steps in 2 s, before a Ctrl-C one second in can land.)
LONG=("${GPT[@]}" --steps 12000 --eval-every 4000)
np -np 2 "$gpt" "${LONG[@]}" --save u.st --log u.jsonl --plot u.svg >u.out 2>&1 || fail "uninterrupted run: $(cat u.out)"
timeout 120 "$mpirun" --oversubscribe -np 2 "$gpt" "${LONG[@]}" --save r.st --log r.jsonl --plot r.svg >r.out 2>&1 &
job=$!
wait_rows r.jsonl 1  # the untrained baseline: training has started
sleep 1
kill -INT "$(pgrep -P $job | head -1)"  # mpirun, as a Ctrl-C in its terminal would
wait $job
rc=$?
stopped=$(sed -n -E 's/^interrupted after ([0-9]+) steps.*/\1/p' r.out)
# OpenMPI's mpirun ends with its own status 1 once it has passed a signal on; the ranks' stop shows in the output.
{ [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ -n "$stopped" ] && [ "$stopped" -lt 12000 ]; } ||
  fail "SIGINT to mpirun: exit $rc, no 'interrupted after N steps': $(cat r.out)"
grep -q "continue with --resume r.st" r.out || fail "SIGINT to mpirun: no resume line: $(cat r.out)"
[ "$(checkpoint_loop_step r.st)" = "$stopped" ] ||
  fail "SIGINT to mpirun: the checkpoint is at step $(checkpoint_loop_step r.st), the run stopped at $stopped"
np -np 2 "$gpt" --data text.txt --resume r.st --save r.st --eval-every 4000 --log r.jsonl --plot r.svg --quiet >r2.out 2>&1 ||
  fail "resume with -np 2: $(cat r2.out)"
grep -q "^resumed r.st at step $stopped\$" r2.out || fail "the resume did not start at step $stopped: $(cat r2.out)"
"$check" --compare-params u.st r.st 0 >/dev/null || fail "stopped at step $stopped by SIGINT to mpirun and resumed: not the uninterrupted run"
cmp <(untimed u.jsonl) <(untimed r.jsonl) || fail "the resumed run's metrics differ from the uninterrupted run's"
echo "ok: SIGINT to mpirun stopped both ranks at step $stopped (mpirun exit $rc), saved; resumed == uninterrupted, bit for bit"

# SIGTERM to every rank (as a batch system sends it): mpirun passes the ranks' status on.
timeout 120 "$mpirun" --oversubscribe -np 2 "$gpt" "${LONG[@]}" --save t.st --log t.jsonl --plot t.svg >t.out 2>&1 &
job=$!
wait_rows t.jsonl 1
sleep 1
kill -TERM "$(rank_pid $job 0)" "$(rank_pid $job 1)"
wait $job
rc=$?
stopped=$(sed -n -E 's/^interrupted after ([0-9]+) steps.*/\1/p' t.out)
{ [ $rc -eq 143 ] && [ -n "$stopped" ] && [ "$(checkpoint_loop_step t.st)" = "$stopped" ]; } ||
  fail "SIGTERM to both ranks: exit $rc (expected 143), checkpoint at $(checkpoint_loop_step t.st): $(cat t.out)"
echo "ok: SIGTERM to both ranks: exit 143, checkpoint at the stop step $stopped"

# One process: SIGTERM and SIGHUP stop it as Ctrl-C does, with their own status.
for signal in TERM HUP; do
  "$gpt" "${LONG[@]}" --save one.st --log one.jsonl --plot one.svg --overwrite >one.out 2>&1 &
  pid=$!
  wait_rows one.jsonl 1
  sleep 0.5
  kill -"$signal" $pid
  wait $pid
  rc=$?
  want=$((128 + $(kill -l "$signal")))
  stopped=$(sed -n -E 's/^interrupted after ([0-9]+) steps.*/\1/p' one.out)
  { [ $rc -eq $want ] && [ -n "$stopped" ] && [ "$(checkpoint_loop_step one.st)" = "$stopped" ]; } ||
    fail "SIG$signal to one process: exit $rc (expected $want): $(cat one.out)"
  echo "ok: SIG$signal to one process: exit $rc, checkpoint at the stop step $stopped"
  rm -f one.st one.jsonl one.svg
done

# --- 2. agreement ----------------------------------------------------------------------------
cp text.txt other.txt
sed -i 's/^1 2 3 4/4 3 2 1/' other.txt  # the same characters, another text
# mismatch PROGRAM 'FLAGS OF RANK 0' 'FLAGS OF RANK 1' WORDS: refused within seconds, naming them.
cases=0
mismatch() {
  local program=$1 words=$4 start rc out ms
  local -a a b
  read -ra a <<<"$2"
  read -ra b <<<"$3"
  start=$(date +%s%N)
  # Outputs of their own for every case: a refused run's configuration copy stays, and the next
  # case must not be refused for replacing it.
  cases=$((cases + 1))
  out=$(np -np 1 "$program" "${a[@]}" --log "a$cases.jsonl" --plot "a$cases.svg" : \
    -np 1 "$program" "${b[@]}" --log "b$cases.jsonl" --plot "b$cases.svg" 2>&1)
  rc=$?
  ms=$(ms_since "$start")
  { [ $rc -eq 1 ] && grep -q "the ranks disagree on what to train.*$words" <<<"$out"; } ||
    fail "'$2' against '$3': exit $rc after $ms ms, wanted the ranks' disagreement naming: $words: $out"
  echo "ok: '$2' against '$3' refused in $ms ms: $words"
}
G="--data text.txt --heads 2 --block-size 16 --batch 8 --warmup 5 --quiet --eval-every 10"
mismatch "$gpt" "$G --layers 2 --steps 20" "$G --layers 3 --steps 20" "--layers: rank 0 has 2, rank 1 has 3"
mismatch "$gpt" "$G --layers 1 --steps 20" "$G --layers 1 --steps 30" "--steps: rank 0 has 20, rank 1 has 30"
mismatch "$gpt" "$G --d-model 32 --steps 20" "$G --d-model 48 --steps 20" "--d-model: rank 0 has 32, rank 1 has 48"
mismatch "$gpt" "$G --layers 1 --seed 1" "$G --layers 1 --seed 2" "--seed: rank 0 has 1, rank 1 has 2"
mismatch "$gpt" "$G --layers 1 --lr 0.002" "$G --layers 1 --lr 0.003" "--lr: rank 0 has 0.002, rank 1 has 0.003"
G2=${G/--data text.txt/}
mismatch "$gpt" "$G2 --layers 1 --data text.txt" "$G2 --layers 1 --data other.txt" "the job's 'data' entry: rank 0 has"
# The same path, another text on one rank (a node's stale copy): the data's checksum differs.
mkdir -p d0 d1 && cp text.txt d0/text.txt && cp other.txt d1/text.txt
start=$(date +%s%N)
out=$(np -np 1 -wdir d0 "$gpt" $G --layers 1 : -np 1 -wdir d1 "$gpt" $G --layers 1 2>&1)
rc=$?
{ [ $rc -eq 1 ] && grep -q "the ranks disagree on what to train.*the job's 'data' entry: rank 0 has .*crc32c" <<<"$out"; } ||
  fail "one --data path, two texts: exit $rc: $out"
echo "ok: one --data path holding another text on rank 1 refused in $(ms_since "$start") ms by the data's checksum"
S="--vocab 8 --length 6 --d-model 16 --heads 2 --d-ff 32 --layers 1 --batch 8 --eval-sequences 16 --quiet"
mismatch "$seq" "$S --task reverse" "$S --task sort" '--task: rank 0 has "reverse", rank 1 has "sort"'
mismatch "$seq" "$S --target-acc 0.5" "$S --target-acc 0.9" "--target-acc: rank 0 has 0.5, rank 1 has 0.9"
# Two checkpoints of one run, at different steps: nothing on the command line differs.
stop_after() {  # stop_after SECONDS COMMAND...: runs it, Ctrl-C after SECONDS of training
  interruptible "${@:2}" >stop.out 2>&1 &
  local pid=$!
  for _ in $(seq 1 200); do
    grep -q "^train " stop.out && break
    sleep 0.1
  done
  sleep "$1"
  kill -INT $pid
  wait $pid
}
stop_after 0.5 "$gpt" "${LONG[@]}" --save ca.st --log ca.jsonl --plot ca.svg
cp ca.st cb.st
stop_after 0.5 "$gpt" --data text.txt --resume cb.st --save cb.st --log ca.jsonl --plot ca.svg --quiet
at=$(checkpoint_loop_step ca.st)
mismatch "$gpt" "--data text.txt --resume ca.st --quiet" "--data text.txt --resume cb.st --quiet" "the step the run starts from: rank 0 has $at, rank 1 has"

# --- 3. timeout ------------------------------------------------------------------------------
ATTOGRAD_COLLECTIVE_TIMEOUT=3 timeout 120 "$mpirun" --oversubscribe -np 2 "$gpt" "${LONG[@]}" --log s.jsonl --plot s.svg >s.out 2>&1 &
job=$!
wait_rows s.jsonl 1
rank1=$(rank_pid $job 1)
[ -n "$rank1" ] || fail "no process of rank 1 found under mpirun"
kill -STOP "$rank1"
start=$(date +%s%N)
wait $job
rc=$?
ms=$(ms_since "$start")
{ [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$ms" -lt 10000 ]; } || fail "a stopped rank with a 3 s limit: exit $rc after $ms ms: $(cat s.out)"
grep -q "attograd: rank 0 of 2: .* waited 3.* rank 1 did not arrive" s.out || fail "the message does not name rank 1: $(cat s.out)"
echo "ok: rank 1 stopped, limit 3 s: the job ended after $ms ms (exit $rc) naming rank 1"

ATTOGRAD_COLLECTIVE_TIMEOUT=8 timeout 120 "$mpirun" --oversubscribe -np 2 "$gpt" "${GPT[@]}" --steps 600 --eval-every 300 \
  --log w.jsonl --plot w.svg >w.out 2>&1 &
job=$!
wait_rows w.jsonl 1
rank1=$(rank_pid $job 1)
kill -STOP "$rank1"
sleep 2
kill -CONT "$rank1"
wait $job || fail "a rank stopped for 2 s under an 8 s limit must finish: $(cat w.out)"
echo "ok: a rank stopped for 2 s under an 8 s limit: the run finished"
out=$(ATTOGRAD_COLLECTIVE_TIMEOUT=soon np -np 2 "$gpt" "${GPT[@]}" --steps 6 --log v.jsonl --plot v.svg 2>&1)
rc=$?
{ [ $rc -eq 2 ] && grep -q "ATTOGRAD_COLLECTIVE_TIMEOUT: 'soon' is not a number of seconds" <<<"$out"; } ||
  fail "ATTOGRAD_COLLECTIVE_TIMEOUT=soon: exit $rc: $out"
echo "ok: ATTOGRAD_COLLECTIVE_TIMEOUT=soon is refused by name"

# --- 4. a rank count that does not divide the checkpoint's batch -------------------------------
# --batch 16 (the one element "8" of GPT)
np -np 2 "$gpt" "${GPT[@]/#8/16}" --steps 10 --eval-every 5 --save b16.st --log b.jsonl --plot b.svg >b.out 2>&1 ||
  fail "batch 16 on 2 ranks: $(cat b.out)"
out=$(np -np 3 "$gpt" --data text.txt --resume b16.st --save b16.st --log b.jsonl --plot b.svg --quiet 2>&1)
rc=$?
{ [ $rc -eq 1 ] && grep -q "the checkpoint's batch (a resumed run keeps it) 16 .* over 3 processes; run with mpirun -np 1, 2, 4, 8 or 16" <<<"$out"; } ||
  fail "a batch-16 checkpoint on 3 ranks: exit $rc: $out"
np -np 4 "$gpt" --data text.txt --resume b16.st --save b16.st --log b.jsonl --plot b.svg --quiet >b4.out 2>&1 ||
  fail "the advice does not hold: -np 4 resume: $(cat b4.out)"
echo "ok: a batch-16 checkpoint on 3 ranks is refused with the counts that work; -np 4 resumes it"
