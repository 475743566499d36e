# Group 8 of tests/hostile/sweep.sh (sourced by it; uses its bookkeeping): train_sequence under
# a real `mpirun -np 2`. Ranks given different flags (`mpirun -np 1 A : -np 1 B`) must be
# refused by name; SIGTERM to mpirun must leave a checkpoint at the stop step; a SIGSTOPped rank
# must end the job within ATTOGRAD_COLLECTIVE_TIMEOUT, naming it.
source "$root/tests/mpi/lib.sh"
MPIRUN=(mpirun --oversubscribe)
# A small task; the runs that train also a small model (the refusals come before training).
MPI_BASE=(--vocab 8 --batch 8 --warmup 5 --eval-sequences 16 --quiet --log m.jsonl --plot m.svg)
MPI_MODEL=(--length 6 --d-model 16 --heads 2 --d-ff 32 --layers 1)

# run_mpi EXPECT WORDS DESCRIPTION MPIRUN-ARGS...: one mpirun job, classified as run() does.
run_mpi() {
  local expect=$1 words=$2 desc=$3 rc t0 ms
  shift 3
  new_case
  t0=$(now_ns)
  (cd "$case_dir" && exec timeout 20 "${MPIRUN[@]}" "$@" >out 2>err </dev/null)
  rc=$?
  ms=$((($(now_ns) - t0) / 1000000))
  classify "$expect" "$rc" "$words" "$case_dir/err" ""
  if [[ $outcome == clear-error ]] && ((MAXMS > 0 && ms > MAXMS)); then
    outcome=UNCLEAR detail=("the refusal took $ms ms (more than $MAXMS ms)")
  fi
  report "$outcome" "$desc" "$ms" "${detail[@]}"
}

# mismatch 'FLAGS OF RANK 0' 'FLAGS OF RANK 1' WORDS: the ranks' disagreement, naming WORDS.
mismatch() {
  local -a a b
  read -ra a <<<"$1"
  read -ra b <<<"$2"
  run_mpi error "disagree|$3" "-np 1 $1 : -np 1 $2" -np 1 "$BIN" "${MPI_BASE[@]}" "${a[@]}" : -np 1 "$BIN" "${MPI_BASE[@]}" "${b[@]}"
}

# start_job FILE ARGS...: an mpirun job in the background in a new case directory (`job` is the
# PID of its `timeout`), once its metrics log has the untrained baseline.
start_job() {
  new_case
  t0=$(now_ns)
  (cd "$case_dir" && exec timeout 20 "${MPIRUN[@]}" -np 2 "$BIN" "${MPI_BASE[@]}" "${MPI_MODEL[@]}" "$@" >out 2>err </dev/null) &
  job=$!
  wait_rows "$case_dir/m.jsonl" 1
}

start_group 8 "processes (mpirun -np 2): ranks that disagree, SIGTERM to mpirun, a stopped rank"
if command -v mpirun >/dev/null && mpirun --version 2>/dev/null | grep -q "Open MPI"; then
  MAXMS=5000 # a refusal before training: mpirun's start and a second at most
  mismatch "--layers 1" "--layers 2" "--layers: rank 0 has 1, rank 1 has 2"
  mismatch "--steps 20" "--steps 30" "--steps: rank 0 has 20, rank 1 has 30"
  mismatch "--d-model 16" "--d-model 32" "--d-model: rank 0 has 16, rank 1 has 32"
  mismatch "--d-ff 32" "--d-ff 64" "--d-ff: rank 0 has 32, rank 1 has 64"
  mismatch "--length 6" "--length 8" "--length: rank 0 has 6, rank 1 has 8"
  mismatch "--target-acc 0.5" "--target-acc 0.9" "--target-acc: rank 0 has 0.5, rank 1 has 0.9"
  mismatch "--seed 1" "--seed 2" "--seed: rank 0 has 1, rank 1 has 2"
  mismatch "--lr 0.005" "--lr 0.01" "--lr: rank 0 has 0.005, rank 1 has 0.01"
  mismatch "--optimizer adam" "--optimizer sgd" "--optimizer: rank 0 has \"adam\", rank 1 has \"sgd\""
  mismatch "--task reverse" "--task sort" "--task: rank 0 has \"reverse\", rank 1 has \"sort\""
  mismatch "--dropout 0" "--dropout 0.1" "--dropout: rank 0 has 0, rank 1 has 0.1"
  mismatch "--heads 2" "--heads 4" "--heads: rank 0 has 2, rank 1 has 4"
  mismatch "--eval-every 10" "--eval-every 5" "--eval-every: rank 0 has 10, rank 1 has 5"
  MAXMS=0
  run_mpi ok "" "-np 1 --threads 1 : -np 1 --threads 2 (per-rank flags may differ)" \
    -np 1 "$BIN" "${MPI_BASE[@]}" "${MPI_MODEL[@]}" --steps 10 --threads 1 : \
    -np 1 "$BIN" "${MPI_BASE[@]}" "${MPI_MODEL[@]}" --steps 10 --threads 2

  # SIGTERM to mpirun: it passes SIGTERM on; both ranks stop after one update and rank 0 saves it.
  start_job --steps 100000 --eval-every 100000 --save ck.st
  sleep 1
  kill -TERM "$(pgrep -P $job | head -1)"
  wait $job
  rc=$?
  ms=$((($(now_ns) - t0) / 1000000))
  stopped=$(sed -n -E 's/^interrupted after ([0-9]+) steps.*/\1/p' "$case_dir/out")
  if ((rc == 124)); then
    outcome=HANG detail=("still running after 20 s")
  elif [[ -n $stopped && $(checkpoint_loop_step "$case_dir/ck.st") == "$stopped" ]]; then
    outcome=ok detail=("stopped at step $stopped, saved there; mpirun exit $rc")
  else
    classify ok "$rc" "" "$case_dir/err" ""
    [[ $outcome == ok ]] && outcome=UNCLEAR detail=("exit $rc without 'interrupted after N steps' and its checkpoint")
  fi
  report "$outcome" "SIGTERM to mpirun: a checkpoint at the stop step" "$ms" "${detail[@]}"

  # A stopped rank: the other gives up after the limit, naming it.
  export ATTOGRAD_COLLECTIVE_TIMEOUT=3
  start_job --steps 100000 --eval-every 100000
  kill -STOP "$(rank_pid $job 1)"
  wait $job
  rc=$?
  ms=$((($(now_ns) - t0) / 1000000))
  unset ATTOGRAD_COLLECTIVE_TIMEOUT
  classify error "$rc" "rank 1 did not arrive|waited 3" "$case_dir/err" ""
  report "$outcome" "SIGSTOP to rank 1, ATTOGRAD_COLLECTIVE_TIMEOUT=3: ends naming rank 1" "$ms" "${detail[@]}"
else
  echo "   (skipped: no Open MPI mpirun)"
fi
