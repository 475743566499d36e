#!/usr/bin/env bash
# Hostile-input sweep of tools/train_sequence: bad flags, sizes that cannot fit, corrupt and
# hand-made checkpoints, outputs that would destroy files or that another run owns, kill -9
# during saves and diverging runs, each tried and counted (a few output cases run train_gpt,
# for --data, and generate, for its writes to stdout). Re-run it after a change to the command line, the checkpoint
# loader, the outputs check or the trainer; it is what the reliability and safety issues' counts
# come from.
#
#   tests/hostile/sweep.sh [BUILD_DIR]      BUILD_DIR defaults to build; runs
#                                           BUILD_DIR/tools/train_sequence (and train_gpt,
#                                           generate)
#   KEEP=1 tests/hostile/sweep.sh           keeps the work directory (its path is printed)
#
# Every case runs under `timeout 20` in its own directory inside a `mktemp -d` directory, which
# is removed at exit. Needs bash, coreutils (timeout, sha256sum, mkfifo) and /usr/bin/python3
# (standard library only; tests/hostile/craft.py makes the checkpoint variants). No network.
# Runs as root too: no case relies on file permissions.
#
# Groups: 1 flags, 2 sizes (memory refusals, a long sequence's peak RSS, --threads 256),
# 3 files given to --resume (special files, truncations, and ~130 variants of a real checkpoint
# made by craft.py, checksums kept consistent where a value or metadata check is the target),
# 4 outputs (every pre-existing file hashed before and after; inputs given as outputs, two runs
# on one path, lock files, a user's file named like a temporary, where a resumed run saves,
# generate's failed writes), 5 kill -9 during saves, then
# resume and Ctrl-C, 6 divergence, 7 config files (only when the build has --write-config),
# 8 processes under `mpirun -np 2` (only with Open MPI; tests/hostile/mpi_cases.sh): ranks given
# different flags, SIGTERM to mpirun, a SIGSTOPped rank. `SWEEP_ONLY=mpi tests/hostile/sweep.sh`
# runs group 8 alone, as CI does.
#
# One line per case: outcome, id, what was tried, wall time. Outcomes:
#   clear-error       the expected non-zero exit (2 for the command line, 1 otherwise) and one
#                     stderr line naming the flag or the file (and the tensor or key)
#   ok                an expected success
#   EXIT0-ON-GARBAGE  exit 0 where an error was expected
#   CRASH             killed by a signal (exit >= 128), or sanitizer / std::terminate text
#   HANG              still running after 20 s (timeout's exit 124)
#   DATA-LOSS         a file that existed before the case was changed or removed by it
#   UNCLEAR           failed, but without the expected exit code or words (stderr is printed)
# The last line is the summary; the exit status is 1 if any case is CRASH, HANG,
# EXIT0-ON-GARBAGE, DATA-LOSS or UNCLEAR (2 if the sweep itself could not start).
set -u
export LC_ALL=C

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build}
[[ -d $build ]] || build=$root/$build
python=/usr/bin/python3
[[ -x $python ]] || python=python3

die() { echo "sweep.sh: $*" >&2; exit 2; }
[[ -d $build ]] || die "no build directory '${1:-build}'"

work=$(mktemp -d "${TMPDIR:-/tmp}/hostile-sweep.XXXXXX") || die "mktemp -d failed"
cleanup() {
  local pid
  for pid in $(jobs -p); do kill -9 "$pid" 2>/dev/null; done
  wait 2>/dev/null
  if [[ ${KEEP:-0} == 1 ]]; then echo "work directory kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 2' INT TERM

# The binaries are copied (with the libraries they load from ../libattograd*.so) so that a rebuild
# of BUILD_DIR during the sweep cannot change them half-way. While one is missing or being
# relinked, wait.
snapshot_binary() {
  local tries=0 name copied
  mkdir -p "$work/bin/tools"
  while ((tries < 60)); do
    copied=1
    for name in train_sequence train_seq2seq train_gpt generate train_bpe export_gpt tokenize evaluate prepare_text; do
      [[ -x $build/tools/$name ]] && cp -p "$build/tools/$name" "$work/bin/tools/" 2>/dev/null || copied=0
    done
    if ((copied)) && { [[ ! -e $build/libattograd.so ]] || cp "$build"/libattograd*.so "$work/bin/" 2>/dev/null; } &&
      "$work/bin/tools/train_sequence" --help >/dev/null 2>&1; then
      return 0
    fi
    ((tries++))
    sleep 3
  done
  die "$build/tools/train_sequence, train_gpt or generate is missing or does not run (waited 3 minutes)"
}
snapshot_binary
BIN=$work/bin/tools/train_sequence
GPT=$work/bin/tools/train_gpt
GEN=$work/bin/tools/generate
sweep_start=$(date +%s%N)

# ------------------------------------------------------------------ bookkeeping
n_tried=0 n_clear=0 n_ok=0 n_crash=0 n_hang=0 n_exit0=0 n_loss=0 n_unclear=0
group=0 case_no=0 id="" case_dir=""
bad_cases=()
crash_re='AddressSanitizer|UndefinedBehaviorSanitizer|LeakSanitizer|ThreadSanitizer|runtime error:|terminate called|Segmentation fault|core dumped|stack smashing|double free|free\(\): |malloc\(\): '
corrupt_re="truncated|CRC-32C|bad JSON|belong to no tensor|overlaps|not an object"

start_group() {
  group=$1
  case_no=0
  printf '\n== %s. %s\n' "$1" "$2"
}

new_case() {
  ((case_no++))
  id=$(printf '%d.%02d' "$group" "$case_no")
  case_dir=$work/cases/$id
  mkdir -p "$case_dir"
}

# report OUTCOME DESCRIPTION MILLISECONDS [DETAIL...]
report() {
  local outcome=$1 desc=$2 ms=$3
  shift 3
  ((n_tried++))
  case $outcome in
    clear-error) ((n_clear++)) ;;
    ok) ((n_ok++)) ;;
    CRASH) ((n_crash++)) ;;
    HANG) ((n_hang++)) ;;
    EXIT0-ON-GARBAGE) ((n_exit0++)) ;;
    DATA-LOSS) ((n_loss++)) ;;
    *) ((n_unclear++)) ;;
  esac
  printf '%-16s %-5s %s  [%s ms]\n' "$outcome" "$id" "$desc" "$ms"
  local line
  for line in "$@"; do printf '%24s%s\n' '' "$line"; done
  case $outcome in
    clear-error | ok) ;;
    *) bad_cases+=("$outcome $id $desc") ;;
  esac
}

# has_words FILE 'a|b|c': one line of FILE holds every word (empty words are ignored).
has_words() {
  local line w found
  local -a ws
  IFS='|' read -ra ws <<<"$2"
  while IFS= read -r line || [[ -n $line ]]; do
    found=1
    for w in "${ws[@]}"; do
      if [[ -n $w && $line != *"$w"* ]]; then found=0; break; fi
    done
    ((found)) && return 0
  done <"$1"
  return 1
}

stderr_lines() { sed -n '1,4{s/^/stderr: /;p}' "$1"; }

# Files a case must leave alone: PROTECT lists them, MAYCHANGE the ones the case may rewrite.
PROTECT=() MAYCHANGE=()
hash_protected() {
  local f
  for f in "${PROTECT[@]}"; do
    if [[ -f $f ]]; then sha256sum <"$f" | cut -c1-64; else echo missing; fi
  done
}
# lost_files BEFORE AFTER: the protected files whose hash changed and may not change.
lost_files() {
  local -a before after
  mapfile -t before <<<"$1"
  mapfile -t after <<<"$2"
  local i m out="" allowed
  for i in "${!PROTECT[@]}"; do
    [[ ${before[i]-} == "${after[i]-}" ]] && continue
    allowed=0
    for m in "${MAYCHANGE[@]}"; do [[ $m == "${PROTECT[i]}" ]] && allowed=1; done
    ((allowed)) || out+="${PROTECT[i]#$work/} (${after[i]-missing})"$'\n'
  done
  printf '%s' "${out%$'\n'}"
}

# classify EXPECT RC WORDS ERRFILE LOST: sets `outcome` and `detail`.
#   EXPECT  usage (exit 2) | error (exit 1) | fail (exit 1 or 2) | ok (exit 0) |
#           either (0, or 1 with the words) | note (documented behaviour; 0 expected and reported)
classify() {
  local expect=$1 rc=$2 words=$3 err=$4 lost=$5
  detail=()
  if ((rc == 124)); then
    outcome=HANG
    detail=("still running after 20 s")
    return
  fi
  if ((rc >= 128)) || grep -qE "$crash_re" "$err"; then
    outcome=CRASH
    mapfile -t detail < <(echo "exit $rc"; stderr_lines "$err")
    return
  fi
  if [[ -n $lost ]]; then
    outcome=DATA-LOSS
    mapfile -t detail < <(echo "exit $rc; changed or removed:"; sed 's/^/  /' <<<"$lost"; stderr_lines "$err")
    return
  fi
  case $expect in
    ok | note)
      if ((rc == 0)); then
        outcome=ok
        [[ $expect == note ]] && detail=("note: loads, as documented (see the description)")
      else
        outcome=UNCLEAR
        mapfile -t detail < <(echo "expected success, got exit $rc"; stderr_lines "$err")
      fi
      ;;
    either | usage | error | fail)
      local want=1
      [[ $expect == usage ]] && want=2
      [[ $expect == fail ]] && want="1 or 2"
      if ((rc == 0)); then
        if [[ $expect == either ]]; then outcome=ok; else outcome=EXIT0-ON-GARBAGE; fi
      elif [[ $rc == "$want" || ($expect == fail && ($rc == 1 || $rc == 2)) ]] && has_words "$err" "$words"; then
        outcome=clear-error
      else
        outcome=UNCLEAR
        mapfile -t detail < <(echo "exit $rc (expected $want), wanted one stderr line with: ${words//|/, }"; stderr_lines "$err")
      fi
      ;;
  esac
}

now_ns() { date +%s%N; }
# alive PID: the process runs (an exited child stays a zombie until waited for, and kill -0
# still reaches a zombie, hence /proc).
alive() {
  local st
  st=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $st && $st != Z ]]
}
# wait_for PID FILE REGEX: 0 once FILE has a line matching REGEX, 1 if PID exited first, 2 after 20 s.
wait_for() {
  local pid=$1 file=$2 re=$3 i
  for ((i = 0; i < 400; i++)); do
    grep -qE "$re" "$file" 2>/dev/null && return 0
    alive "$pid" || { grep -qE "$re" "$file" 2>/dev/null && return 0; return 1; }
    sleep 0.05
  done
  return 2
}
MAXMS=0   # when set, a slower case is UNCLEAR (refusals that must be quick)
VMEM_KB="" # when set, the address-space limit of a case (for inputs that could read forever)

# run EXPECT WORDS DESCRIPTION ARGS...: one invocation of train_sequence (of $BIN), classified.
# Its stdout goes to the case's file `out`, or to $STDOUT when set ("closed": no stdout at all).
run() {
  local expect=$1 words=$2 desc=$3
  shift 3
  new_case
  local before after lost rc t0 ms
  before=$(hash_protected)
  t0=$(now_ns)
  (
    cd "$case_dir" || exit 99
    [[ -z $VMEM_KB ]] || ulimit -v "$VMEM_KB"
    [[ ${STDOUT-} != closed ]] || exec timeout 20 "$BIN" "$@" >&- 2>err </dev/null
    exec timeout 20 "$BIN" "$@" >"${STDOUT:-out}" 2>err </dev/null
  )
  rc=$?
  ms=$((($(now_ns) - t0) / 1000000))
  after=$(hash_protected)
  lost=$(lost_files "$before" "$after")
  classify "$expect" "$rc" "$words" "$case_dir/err" "$lost"
  if [[ $outcome == clear-error ]] && ((MAXMS > 0 && ms > MAXMS)); then
    outcome=UNCLEAR
    detail=("the refusal took $ms ms (more than $MAXMS ms)")
  fi
  report "$outcome" "$desc" "$ms" "${detail[@]}"
}

# ------------------------------------------------------------------ summary
finish_sweep() {
  wall_ms=$((($(now_ns) - sweep_start) / 1000000))
  echo
  if ((${#bad_cases[@]} > 0)); then
    echo "failing cases:"
    printf '  %s\n' "${bad_cases[@]}"
  fi
  printf 'wall time %d.%01d s; binary %s (sha256 %s, built %s)\n' $((wall_ms / 1000)) $((wall_ms % 1000 / 100)) \
    "$build/tools/train_sequence" "$(sha256sum <"$BIN" | cut -c1-12)" "$(date -r "$BIN" '+%F %T')"
  echo "hostile sweep: $n_tried tried, $n_clear clear errors, $n_ok ok, $n_crash crashes, $n_hang hangs, $n_exit0 exit-0-on-garbage, $n_loss data-loss, $n_unclear unclear"
  ((n_crash + n_hang + n_exit0 + n_loss + n_unclear == 0))
}

# SWEEP_ONLY=mpi runs group 8 alone (CI does); SWEEP_ONLY=gpt2 group 9 (below, after the fixtures).
if [[ ${SWEEP_ONLY:-} == mpi ]]; then
  source "$here/mpi_cases.sh"
  finish_sweep
  exit
fi

# ------------------------------------------------------------------ fixtures
fix=$work/fixtures
mkdir -p "$fix"
(cd "$fix" && timeout 60 "$BIN" --steps 20 --warmup 5 --eval-every 10 --save ck.safetensors --quiet \
  --log ck.jsonl --plot ck.svg >make-ck.out 2>make-ck.err) ||
  die "could not make the reference checkpoint: $(cat "$fix/make-ck.err")"
CK=$fix/ck.safetensors
"$python" "$here/craft.py" "$CK" "$fix/crafted" >/dev/null || die "craft.py failed"

# SWEEP_ONLY=gpt2 runs group 9 alone.
if [[ ${SWEEP_ONLY:-} == gpt2 ]]; then
  source "$here/gpt2_cases.sh"
  finish_sweep
  exit
fi

# ------------------------------------------------------------------ 1. command line
start_group 1 "flags: expect exit 2 and a message naming the flag"
PROTECT=() MAYCHANGE=()
u() { run usage "$@"; }
u "--frobnicate" "unknown flag --frobnicate" --frobnicate
u "--frobnicate" "unknown flag with a value (--frobnicate=1)" --frobnicate=1
u "-x" "single-dash flag -x" -x
u "reverse" "a bare word ('reverse' without --task)" reverse
u "--steps|missing" "--steps without a value" --steps
u "--steps" "--steps= (empty value)" --steps=
u "--steps" "--steps abc" --steps abc
u "--steps" "--steps 1.5" --steps 1.5
u "--steps" "--steps 1e3" --steps 1e3
u "--steps" "--steps +5" --steps +5
u "--steps" "--steps ' 5' (leading space)" --steps " 5"
u "--steps" "--steps 5=6 (--steps=5=6)" --steps=5=6
u "--steps" "--steps 0" --steps 0
u "--steps" "--steps -5" --steps -5
u "--steps" "--steps 2147483648 (just over the limit)" --steps 2147483648
u "--steps" "--steps 99999999999999999999 (overflows int64)" --steps 99999999999999999999
u "--steps" "--steps given twice" --steps 10 --steps 20
u "--vocab" "--vocab 1" --vocab 1
u "--vocab" "--vocab 1048577 (just over 2^20)" --vocab 1048577
u "--length" "--length 0" --length 0
u "--length" "--length 4097 (documented 1..4096)" --length 4097
u "--d-model" "--d-model 0" --d-model 0
u "--d-model" "--d-model 65537 (just over 2^16)" --d-model 65537
u "--heads" "--heads 0" --heads 0
u "--heads" "--heads 65537" --heads 65537
u "--heads|--d-model" "--heads 3 does not divide --d-model 64" --heads 3
u "--heads|--d-model" "--heads 128 with --d-model 64" --heads 128
u "--d-ff" "--d-ff 1048577" --d-ff 1048577
u "--layers" "--layers 0" --layers 0
u "--layers" "--layers 1025 (just over 1024)" --layers 1025
u "--batch" "--batch 0" --batch 0
u "--batch" "--batch 65537 (just over 2^16)" --batch 65537
u "--eval-every" "--eval-every 0" --eval-every 0
u "--eval-sequences" "--eval-sequences 0" --eval-sequences 0
u "--eval-sequences" "--eval-sequences 1048577" --eval-sequences 1048577
u "--threads" "--threads 0" --threads 0
u "--threads" "--threads 257 (just over 256)" --threads 257
u "--warmup" "--warmup -1" --warmup -1
u "--warmup|--steps" "--warmup 1000 with --steps 1000 (cosine)" --warmup 1000
u "--lr" "--lr nan" --lr nan
u "--lr" "--lr inf" --lr inf
u "--lr" "--lr -inf" --lr -inf
u "--lr" "--lr 1e999 (overflows double)" --lr 1e999
u "--lr" "--lr 0x10 (hex)" --lr 0x10
u "--lr" "--lr 1000.001 (just over 1e3)" --lr 1000.001
u "--lr" "--lr 0" --lr 0
u "--lr" "--lr -0.1" --lr -0.1
u "--min-lr|--lr" "--min-lr 0.1 above --lr 0.01" --min-lr 0.1 --lr 0.01
u "--min-lr" "--min-lr nan" --min-lr nan
u "--weight-decay" "--weight-decay inf" --weight-decay inf
u "--dropout" "--dropout 1 (documented [0, 1))" --dropout 1
u "--dropout" "--dropout -0.1" --dropout -0.1
u "--dropout" "--dropout nan" --dropout nan
u "--momentum" "--momentum 1" --momentum 1
u "--clip" "--clip -1" --clip -1
u "--clip" "--clip 1e7 (over 1e6)" --clip 1e7
u "--target-acc" "--target-acc 0" --target-acc 0
u "--target-acc" "--target-acc 1.5" --target-acc 1.5
u "--seed" "--seed -1" --seed -1
u "--seed" "--seed 18446744073709551616 (2^64)" --seed 18446744073709551616
u "--task" "--task bogus" --task bogus
u "--positional" "--positional rotary" --positional rotary
u "--optimizer" "--optimizer lion" --optimizer lion
u "--schedule" "--schedule step" --schedule step
u "--pre-norm|--post-norm" "--pre-norm with --post-norm" --pre-norm --post-norm
u "--quiet" "--quiet=banana (a switch given a value)" --quiet=banana
u "--shift-k|--task shift" "--shift-k 3 without --task shift" --shift-k 3
u "--shift-k|--length" "--task shift --shift-k 16 (= --length)" --task shift --shift-k 16
u "--shift-k" "--task shift --shift-k 0" --task shift --shift-k 0
u "--d-model|--resume" "--resume with --d-model" --resume "$CK" --d-model 32
u "--lr|--resume" "--resume with --lr" --resume "$CK" --lr 0.1
u "--steps 5|--resume|budget of 20" "--resume with --steps 5, below the checkpoint's budget" --resume "$CK" --steps 5
u "--seed|--resume" "--resume with --seed" --resume "$CK" --seed 1
u "--post-norm|--resume" "--resume with --post-norm" --resume "$CK" --post-norm
u "--task|--resume" "--resume with --task" --resume "$CK" --task sort
u "--save" "--save '' (empty path, e.g. an unset variable)" --save ""
u "--resume" "--resume '' (empty path, e.g. an unset variable)" --resume ""
run ok "" "--help after an unknown flag (help always wins, exit 0)" --frobnicate --help

# ------------------------------------------------------------------ 2. sizes
start_group 2 "sizes: refusals must be quick and name the memory and the flags"
MAXMS=5000
run error "memory|--d-model" "--d-model 65536" --d-model 65536
run error "memory|--layers" "--layers 1024 --d-model 4096 --d-ff 16384" --layers 1024 --d-model 4096 --d-ff 16384
run error "memory|--batch|--length" "--length 4096 --batch 64 --d-model 512" --length 4096 --batch 64 --d-model 512
run error "memory|--vocab" "--vocab 1048576 --d-model 8192" --vocab 1048576 --d-model 8192
run error "memory|--batch" "--batch 65536 --length 4096" --batch 65536 --length 4096
run error "memory|--heads" "--heads 65536 --d-model 65536" --heads 65536 --d-model 65536
MAXMS=0
# A long sequence must train with modest memory (evaluation runs in chunks).
new_case
rss_limit_kb=$((1024 * 1024))
t0=$(now_ns)
if [[ -x /usr/bin/time ]]; then
  (cd "$case_dir" && exec /usr/bin/time -f %M -o rss timeout 20 "$BIN" --length 2048 --batch 1 --steps 2 --warmup 1 \
    --eval-every 1 --eval-sequences 8 --quiet >out 2>err </dev/null)
else
  (cd "$case_dir" && exec timeout 20 "$BIN" --length 2048 --batch 1 --steps 2 --warmup 1 --eval-every 1 \
    --eval-sequences 8 --quiet >out 2>err </dev/null)
fi
rc=$?
ms=$((($(now_ns) - t0) / 1000000))
classify ok "$rc" "" "$case_dir/err" ""
rss_kb=$(tail -n 1 "$case_dir/rss" 2>/dev/null)
if [[ $rss_kb =~ ^[0-9]+$ ]]; then
  rss_note="peak RSS $((rss_kb / 1024)) MiB"
  if [[ $outcome == ok ]] && ((rss_kb > rss_limit_kb)); then
    outcome=UNCLEAR
    detail=("peak RSS $((rss_kb / 1024)) MiB, more than $((rss_limit_kb / 1024)) MiB")
  fi
else
  rss_note="peak RSS not measured (no /usr/bin/time)"
fi
report "$outcome" "--length 2048 --batch 1 --steps 2 --eval-sequences 8 trains ($rss_note)" "$ms" "${detail[@]}"
run ok "" "--threads 256 (the documented maximum), 2 steps" --threads 256 --steps 2 --warmup 1 --eval-sequences 16 --quiet

# ------------------------------------------------------------------ 3. checkpoints given to --resume
start_group 3 "--resume with special, truncated, corrupt and hand-made checkpoints: exit 1 naming the file"
R=(--eval-sequences 32 --quiet)
special=$fix/special
mkdir -p "$special/a-directory"
: >"$special/empty.safetensors"
mkfifo "$special/fifo.safetensors"
ln -s /dev/zero "$special/link-to-dev-zero"
ln -s "$special/nowhere" "$special/dangling-link"
PROTECT=("$special/empty.safetensors") MAYCHANGE=()
run error "$special/missing.safetensors" "a file that does not exist" --resume "$special/missing.safetensors" "${R[@]}"
run error "$special/empty.safetensors" "an empty file" --resume "$special/empty.safetensors" "${R[@]}"
PROTECT=()
run error "$special/a-directory" "a directory" --resume "$special/a-directory" "${R[@]}"
run error "$special/fifo.safetensors" "a FIFO with no writer (must not block)" --resume "$special/fifo.safetensors" "${R[@]}"
run error "/dev/zero" "/dev/zero (must not read forever)" --resume /dev/zero "${R[@]}"
run error "/dev/null" "/dev/null" --resume /dev/null "${R[@]}"
run error "link-to-dev-zero" "a symlink to /dev/zero" --resume "$special/link-to-dev-zero" "${R[@]}"
run error "dangling-link" "a dangling symlink" --resume "$special/dangling-link" "${R[@]}"
run error "/proc/self/status" "/proc/self/status (a regular file whose size reads as 0)" --resume /proc/self/status "${R[@]}"
run error "ck.safetensors/" "the checkpoint's path with a trailing slash" --resume "$CK/" "${R[@]}"
while IFS=$'\t' read -r name expect words desc; do
  file=$fix/crafted/$name.safetensors
  PROTECT=("$file")
  case $expect in
    fail)
      # A refusal for memory reasons speaks of "the checkpoint's" settings rather than the path.
      if [[ $words == memory ]]; then w="memory|checkpoint"; else w="$file"; [[ $words == - ]] || w+="|$words"; fi
      run error "$w" "$desc" --resume "$file" "${R[@]}"
      ;;
    ok | note) run "$expect" "" "$desc" --resume "$file" "${R[@]}" ;;
    either) run either "$file" "$desc" --resume "$file" "${R[@]}" ;;
    *) die "craft.py: unknown expectation '$expect' for $name" ;;
  esac
done <"$fix/crafted/manifest.tsv"
PROTECT=()

# ------------------------------------------------------------------ 4. outputs
start_group 4 "outputs: no file of the user's may be lost"
pristine=$fix/outputs
mkdir -p "$pristine/adir"
cp "$CK" "$pristine/own.ck"           # the run being resumed
cp "$CK" "$pristine/other.ck"         # another run's checkpoint
cp "$fix/ck.jsonl" "$pristine/old.jsonl"  # an earlier run's metrics log
cp "$fix/ck.svg" "$pristine/old.svg"      # an earlier run's plot
printf 'my notes\nline two\n' >"$pristine/notes.txt"
printf '{"learning_rate": 0.01, "comment": "my hand-written settings"}\n' >"$pristine/config.json"
printf '<svg xmlns="http://www.w3.org/2000/svg"><circle r="5"/></svg>\n' >"$pristine/logo.svg"
printf 'keep me\n' >"$pristine/adir/keep.txt"
mkdir -p "$pristine/proj"
printf '# my project settings\nname = "demo"\n' >"$pristine/proj/config.toml"  # a user's own file
printf '# my settings, by hand\nsteps = 3\nwarmup = 1\n' >"$pristine/mine.toml"  # a user's config
dead_pid=$(sh -c 'echo $$')  # a process that has ended
printf 'my notes\n' >"$pristine/k.ck.tmp-$dead_pid-0"  # a user's file named like a temporary
printf 'my notes\n' >"$pristine/user.ck.lock"          # ... and one named like a lock file
printf 'attograd output lock held by pid %s\n' "$dead_pid" >"$pristine/stale.ck.lock"  # a killed run's
O=$work/out
reset_outputs() {
  rm -rf "$O"
  cp -a "$pristine" "$O"
  ln -s own.ck "$O/link-own.ck"
  ln "$O/own.ck" "$O/own.hard"
  ln -s other.ck "$O/link-other.ck"
  ln -s notes.txt "$O/link-notes"
  ln -s old.jsonl "$O/link-old.jsonl"
  ln -s mine.toml "$O/link-mine.toml"
  ln "$O/mine.toml" "$O/mine.hard"
  mkfifo "$O/fifo"
  mapfile -t PROTECT < <(find "$O" -type f | sort)
  MAYCHANGE=()
}
F=(--steps 3 --warmup 1 --eval-every 1 --eval-sequences 16 --quiet)  # a short fresh run
RS=(--eval-sequences 16 --quiet)                                   # a resumed run
o() { # EXPECT WORDS DESC [MAYCHANGE...] -- ARGS...
  local expect=$1 words=$2 desc=$3
  shift 3
  reset_outputs
  while [[ $1 != -- ]]; do MAYCHANGE+=("$O/$1"); shift; done
  shift
  run "$expect" "$words" "$desc" "$@"
}
o error "--plot|own.ck" "--resume own.ck --plot own.ck" -- --resume "$O/own.ck" --plot "$O/own.ck" "${RS[@]}"
o error "--log|own.ck" "--resume own.ck --log own.ck" -- --resume "$O/own.ck" --log "$O/own.ck" "${RS[@]}"
o error "--log|link-own.ck" "--resume own.ck --log <symlink to own.ck>" -- --resume "$O/own.ck" --log "$O/link-own.ck" "${RS[@]}"
o error "--plot|own.hard" "--resume own.ck --plot <hard link to own.ck>" -- --resume "$O/own.ck" --plot "$O/own.hard" "${RS[@]}"
o error "--log|own.ck" "--resume <symlink> --log <its target>" -- --resume "$O/link-own.ck" --log "$O/own.ck" "${RS[@]}"
o error "--save|other.ck" "--resume own.ck --save other.ck (another run's checkpoint)" -- --resume "$O/own.ck" --save "$O/other.ck" "${RS[@]}"
o error "--log|other.ck" "fresh run --log <existing checkpoint>" -- --log "$O/other.ck" "${F[@]}"
o error "--plot|other.ck" "fresh run --plot <existing checkpoint>" -- --plot "$O/other.ck" "${F[@]}"
o error "--save|--log" "--save X --log X (X new)" -- --save "$O/x" --log "$O/x" "${F[@]}"
o error "--log|--plot" "--log X --plot X (X new)" -- --log "$O/x" --plot "$O/x" "${F[@]}"
o error "--save|--plot" "--save X --plot X (X new)" -- --save "$O/x" --plot "$O/x" "${F[@]}"
o error "--save|--log" "--save X --log ./X (same file, two spellings)" -- --save "$O/x" --log "$O/./x" "${F[@]}"
o error "--log|--plot" "--log old.jsonl --plot <symlink to old.jsonl>" -- --log "$O/old.jsonl" --plot "$O/link-old.jsonl" "${F[@]}"
o error "--save|other.ck|--resume|--overwrite" "fresh run --save <another run's checkpoint>" -- --save "$O/other.ck" "${F[@]}"
o ok "" "fresh run --save <another run's checkpoint> --overwrite" other.ck -- --save "$O/other.ck" --overwrite "${F[@]}"
o error "--save|link-other.ck|--overwrite" "fresh run --save <symlink to another run's checkpoint>" -- --save "$O/link-other.ck" "${F[@]}"
o error "--save|notes.txt|--overwrite" "fresh run --save <a user's text file>" -- --save "$O/notes.txt" "${F[@]}"
o error "--log|notes.txt" "fresh run --log <a user's text file>" -- --log "$O/notes.txt" "${F[@]}"
o error "--plot|notes.txt" "fresh run --plot <a user's text file>" -- --plot "$O/notes.txt" "${F[@]}"
o error "--log|link-notes" "fresh run --log <symlink to a user's text file>" -- --log "$O/link-notes" "${F[@]}"
o error "--log|config.json" "fresh run --log <a user's JSON settings file>" -- --log "$O/config.json" "${F[@]}"
o error "--plot|logo.svg" "fresh run --plot <a user's own SVG drawing>" -- --plot "$O/logo.svg" "${F[@]}"
o error "--plot|adir" "--plot <a directory>" -- --plot "$O/adir" "${F[@]}"
o error "--save|adir" "--save <a directory>" -- --save "$O/adir" "${F[@]}"
o error "--log|adir" "--log <a directory>" -- --log "$O/adir" "${F[@]}"
o error "--log|fifo" "--log <a FIFO> (must not block)" -- --log "$O/fifo" "${F[@]}"
o error "--save|fifo" "--save <a FIFO>" -- --save "$O/fifo" "${F[@]}"
o error "--plot|fifo" "--plot <a FIFO>" -- --plot "$O/fifo" "${F[@]}"
o error "--log|/proc/x/y" "--log /proc/x/y" -- --log /proc/x/y "${F[@]}"
o error "--log|/proc/self/x" "--log /proc/self/x" -- --log /proc/self/x "${F[@]}"
o error "--save|notes.txt/ck" "--save notes.txt/ck (parent is a file)" -- --save "$O/notes.txt/ck" "${F[@]}"
long=$(printf 'n%.0s' {1..300})
o error "$long.ck" "--save with a 300-character file name" -- --save "$O/$long.ck" "${F[@]}"
o ok "" "--save sub/dir/new.ck (directories created)" -- --save "$O/sub/dir/new.ck" "${F[@]}"
o error "--log|old.jsonl|earlier run|--overwrite" "fresh run --log <an earlier run's metrics log>" -- --log "$O/old.jsonl" "${F[@]}"
o error "--plot|old.svg|earlier run|--overwrite" "fresh run --plot <an earlier run's plot>" -- --plot "$O/old.svg" "${F[@]}"
o ok "" "fresh run --log <an earlier run's metrics log> --overwrite" old.jsonl -- --log "$O/old.jsonl" --overwrite "${F[@]}"
o ok "" "fresh run --plot <an earlier run's plot> --overwrite" old.svg -- --plot "$O/old.svg" --overwrite "${F[@]}"
o ok "" "--resume own.ck --save own.ck (continues its own checkpoint)" own.ck own.hard -- --resume "$O/own.ck" --save "$O/own.ck" "${RS[@]}"
o ok "" "--resume own.ck --log <an earlier run's metrics log>" old.jsonl -- --resume "$O/own.ck" --log "$O/old.jsonl" "${RS[@]}"
# Builds that write a copy of the run's configuration beside the metrics log must not take a
# user's config.toml for their own.
o either "config.toml" "fresh run --log proj/metrics.jsonl beside the user's own proj/config.toml" -- \
  --log "$O/proj/metrics.jsonl" "${F[@]}"
# No input is an output (--config, --resume; --data of train_gpt), through links, with or
# without --overwrite; what carries an input on (the resumed checkpoint) still works above.
o error "--log|--config|mine.toml" "--config mine.toml --log mine.toml --overwrite" -- \
  --config "$O/mine.toml" --log "$O/mine.toml" --overwrite "${F[@]}"
o error "--save|--config" "--config <symlink to mine.toml> --save mine.toml --overwrite" -- \
  --config "$O/link-mine.toml" --save "$O/mine.toml" --overwrite "${F[@]}"
o error "--plot|--config" "--config <hard link to mine.toml> --plot mine.toml --overwrite" -- \
  --config "$O/mine.hard" --plot "$O/mine.toml" --overwrite "${F[@]}"
o error "--write-config|--config" "--config mine.toml --write-config mine.toml --overwrite" -- \
  --config "$O/mine.toml" --write-config "$O/mine.toml" --overwrite
o error "--write-config|checkpoint being resumed" "--resume own.ck --write-config own.ck --overwrite" -- \
  --resume "$O/own.ck" --write-config "$O/own.ck" --overwrite
o error "--log|checkpoint being resumed" "--resume own.ck --save new.ck --log <hard link to own.ck> --overwrite" -- \
  --resume "$O/own.ck" --save "$O/new.ck" --log "$O/own.hard" --overwrite "${RS[@]}"
G=(--steps 2 --warmup 1 --eval-every 2 --d-model 8 --heads 1 --layers 1 --block-size 8 --quiet)  # train_gpt
BIN=$GPT o error "--save|--data|notes.txt" "train_gpt --data notes.txt --save notes.txt --overwrite" -- \
  --data "$O/notes.txt" --save "$O/notes.txt" --overwrite "${G[@]}"
BIN=$GPT o error "--log|--data" "train_gpt --data <symlink to notes.txt> --log notes.txt --overwrite" -- \
  --data "$O/link-notes" --log "$O/notes.txt" --overwrite "${G[@]}"
BIN=$GPT o error "--log|--data|old.jsonl" "train_gpt --data old.jsonl (an earlier run's log) --log old.jsonl" -- \
  --data "$O/old.jsonl" --log "$O/old.jsonl" "${G[@]}"
# Files named like ours are not ours: a temporary of a dead pid, a lock file; a killed run's lock
# file is taken over.
o ok "" "fresh run --save k.ck beside a user's k.ck.tmp-<dead pid>-0 (the save's sweep keeps it)" -- \
  --save "$O/k.ck" "${F[@]}"
o error "user.ck.lock|not a lock" "fresh run --save user.ck beside a user's file user.ck.lock" -- --save "$O/user.ck" "${F[@]}"
o ok "" "fresh run --save stale.ck, whose lock file a killed run left (taken over)" stale.ck.lock -- \
  --save "$O/stale.ck" "${F[@]}"

# Two runs on one path: the first trains until Ctrl-C; a second on its --save (even with
# --overwrite) or on its log is refused at start naming the first's pid; the first's log stays
# one run's, its steps rising.
reset_outputs
E=(--task sort --vocab 64 --length 32 --d-model 16 --heads 2 --d-ff 32 --layers 1 --batch 8 --warmup 1 --steps 1000000
  --eval-every 5 --eval-sequences 8 --target-acc 1 --quiet)
mkdir -p "$work/first"
(cd "$work/first" && exec "$BIN" "${E[@]}" --save "$O/busy.ck" --log "$O/busy/m.jsonl" >out 2>err </dev/null) &
first=$!
if wait_for "$first" "$O/busy/m.jsonl" '^\{"step":0,'; then
  run error "--save|in use|pid $first" "a second run on a training run's --save, with --overwrite" \
    --save "$O/busy.ck" --overwrite --log "$O/second/m.jsonl" "${F[@]}"
  run error "--log|in use|pid $first" "a second run on a training run's --log" --log "$O/busy/m.jsonl" \
    --save "$O/second.ck" "${F[@]}"
fi
new_case
t0=$(now_ns)
kill -INT "$first" 2>/dev/null
for ((i = 0; i < 400; i++)); do alive "$first" || break; sleep 0.05; done
alive "$first" && kill -9 "$first"
wait "$first"
rc=$?
ms=$((($(now_ns) - t0) / 1000000))
rows=$(sed -n 's/^{"step":\([0-9]*\),.*}$/\1/p' "$O/busy/m.jsonl" | tr '\n' ' ')
if ((rc != 130)); then
  classify ok "$rc" "" "$work/first/err" ""
  outcome=UNCLEAR detail=("the first run ended with $rc after Ctrl-C, expected 130")
elif [[ $(wc -l <"$O/busy/m.jsonl") -ne $(wc -w <<<"$rows") ]] || [[ $(tr ' ' '\n' <<<"$rows" | sed '/^$/d' | sort -n -u | tr '\n' ' ') != "$rows" ]]; then
  outcome=DATA-LOSS detail=("its metrics log is not one run's rising steps: $(head -c 300 "$O/busy/m.jsonl")")
else
  outcome=ok detail=()
fi
report "$outcome" "the first run, stopped with Ctrl-C: exit 130, its log one run's (steps $rows)" "$ms" "${detail[@]}"

# A resumed run saves where it came from: a run stopped early at a low --target-acc is resumed
# without --save; its further steps must be in its checkpoint, and it must say so before training.
reset_outputs
C=(--task copy --vocab 2 --length 1 --d-model 8 --heads 1 --d-ff 8 --layers 1 --batch 8 --warmup 1 --steps 40
  --eval-every 2 --eval-sequences 16 --quiet)
run ok "" "fresh run stopped early by --target-acc 0.01 --save mid.ck" "${C[@]}" --target-acc 0.01 --save "$O/mid.ck" \
  --log "$O/mid/m.jsonl"
run ok "" "--resume mid.ck (no --save) --target-acc 1: trains on" --resume "$O/mid.ck" --target-acc 1 \
  --eval-sequences 16 --log "$O/mid/m.jsonl" --quiet
resumed_to=$(sed -n 's/.* after \([0-9]*\) steps (.*/\1/p' "$case_dir/out")
said=$(sed -n '2,3p' "$case_dir/out" | grep '^save ')  # after 'resumed ...' and the run's directory
new_case
t0=$(now_ns)
(cd "$case_dir" && exec timeout 20 "$BIN" --resume "$O/mid.ck" --eval-sequences 16 --log "$O/mid/m.jsonl" --quiet \
  >out 2>err </dev/null)
rc=$?
ms=$((($(now_ns) - t0) / 1000000))
classify ok "$rc" "" "$case_dir/err" ""
if [[ $outcome == ok && $said != "save   $O/mid.ck at every evaluation and at the end" ]]; then
  outcome=UNCLEAR detail=("the resumed run did not say where it saves; its second line: $said")
elif [[ $outcome == ok ]] && ! grep -qx "resumed $O/mid.ck at step ${resumed_to:-?}" "$case_dir/out"; then
  outcome=DATA-LOSS detail=("the resumed steps (to ${resumed_to:-?}) were not saved: $(head -1 "$case_dir/out")")
fi
report "$outcome" "mid.ck then holds the resumed run's step ${resumed_to:-?}, as it said" "$ms" "${detail[@]}"

# generate's writes: a full disk, a closed stdout, a reader gone with SIGPIPE ignored (must end at
# once, not generate 10^8 tokens into a closed pipe); --seed as train_gpt takes it.
PROTECT=() MAYCHANGE=()
gck=$fix/gpt.ck
(cd "$fix" && timeout 60 "$GPT" --data "$root/README.md" "${G[@]}" --save "$gck" --log gpt/m.jsonl --plot gpt/p.svg \
  >make-gpt.out 2>make-gpt.err) || die "could not make the GPT checkpoint: $(cat "$fix/make-gpt.err")"
P=(--checkpoint "$gck" --prompt "The ")
BIN=$GEN run usage "--seed|-1" "generate --seed -1" "${P[@]}" --tokens 5 --seed -1
BIN=$GEN run usage "--seed|18446744073709551616" "generate --seed 2^64" "${P[@]}" --tokens 5 --seed 18446744073709551616
BIN=$GEN STDOUT=/dev/full run error "standard output|No space left" "generate >/dev/full" "${P[@]}" --tokens 20
BIN=$GEN STDOUT=closed run error "standard output" "generate with stdout closed" "${P[@]}" --tokens 20
new_case
t0=$(now_ns)
(
  cd "$case_dir" || exit 99
  trap '' PIPE
  timeout 20 "$GEN" "${P[@]}" --tokens 100000000 2>err </dev/null | head -c 10 >out
  exit "${PIPESTATUS[0]}"
)
rc=$?
ms=$((($(now_ns) - t0) / 1000000))
classify error "$rc" "standard output|Broken pipe" "$case_dir/err" ""
report "$outcome" "generate --tokens 100000000 | head -c 10, SIGPIPE ignored (ends at once)" "$ms" "${detail[@]}"
PROTECT=() MAYCHANGE=()

# ------------------------------------------------------------------ 5. kill -9 during saves
start_group 5 "kill -9 during saves: the checkpoint still resumes, temporaries do not pile up"
# A tiny model saving at every step: most of its time is spent saving. The budget is far away,
# so a resumed run is stopped with Ctrl-C (SIGINT: finish the step, save, exit 130).
# (sort with vocab 64, length 32 stays far from 100% exact for minutes, so no run ends early.)
K=(--task sort --vocab 64 --length 32 --d-model 16 --heads 2 --d-ff 32 --layers 1 --batch 8 --steps 1000000
  --warmup 1 --eval-every 1 --eval-sequences 8 --target-acc 1 --quiet)

# stop_with_sigint PID FILE: once the run is training (its summary lines are out), SIGINT; the
# exit code, or 124 when it is not stopped within 20 s.
stop_with_sigint() {
  local pid=$1 file=$2 w
  wait_for "$pid" "$file" '^train  '
  w=$?
  if ((w == 0)); then
    sleep 0.3
    kill -INT "$pid" 2>/dev/null
    local i=0
    while alive "$pid" && ((i++ < 400)); do sleep 0.05; done
  fi
  if alive "$pid"; then
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 124
  fi
  wait "$pid"
}
count_temps() {
  shopt -s nullglob
  local t=("$1"/k.ck.tmp-*)
  shopt -u nullglob
  echo ${#t[@]}
}

RANDOM=20261124 # the moments are drawn reproducibly (what the process is doing then is not)
kills=0 mid_save=0
# Seven kills at random moments, then three aimed at a save in progress: once a temporary
# "k.ck.tmp-*" exists, kill at once.
for i in 1 2 3 4 5 6 7 8 9 10; do
  new_case
  delay_ms=$((300 + RANDOM % 1200))
  (cd "$case_dir" && exec "$BIN" "${K[@]}" --save k.ck --log k.jsonl --plot k.svg >run.out 2>run.err </dev/null) &
  pid=$!
  wait_for "$pid" "$case_dir/run.out" '^train  '
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  aim=""
  if ((i > 7)); then
    deadline=$((SECONDS + 5))
    while ((SECONDS < deadline)) && ! compgen -G "$case_dir/k.ck.tmp-*" >/dev/null; do :; done
    aim=", aimed at a save"
  fi
  if alive "$pid" && kill -9 "$pid" 2>/dev/null; then state="kill -9$aim"; ((kills++)); else state="(exited before the kill)"; fi
  wait "$pid" 2>/dev/null
  temps=$(count_temps "$case_dir")
  ((temps > 0)) && ((mid_save++))
  t0=$(now_ns)
  (cd "$case_dir" && exec "$BIN" --resume k.ck --save k.ck --log k.jsonl --plot k.svg --eval-every 1 \
    --eval-sequences 8 --target-acc 1 --quiet >out 2>err </dev/null) &
  stop_with_sigint $! "$case_dir/out"
  rc=$?
  ms=$((($(now_ns) - t0) / 1000000))
  left=$(count_temps "$case_dir")
  step=$(grep -o 'at step [0-9]*' "$case_dir/out")
  desc="$state ${delay_ms} ms into training ($temps temporaries left); --resume k.ck --save k.ck"
  detail=()
  if ((rc == 130)) && grep -q '^interrupted after' "$case_dir/out"; then
    outcome=ok
    desc+=": resumed ${step:-?}, saved, Ctrl-C: exit 130"
  elif ((rc == 124)); then
    outcome=HANG detail=("the resumed run did not stop within 20 s of SIGINT")
  elif ((rc == 1)) && grep -qE "$corrupt_re" "$case_dir/err"; then
    outcome=UNCLEAR
    mapfile -t detail < <(echo "the killed run left a checkpoint that does not load:"; stderr_lines "$case_dir/err")
  elif ((rc == 1)) && [[ ! -e $case_dir/k.ck ]] && has_words "$case_dir/err" "k.ck"; then
    outcome=clear-error
    desc+=": killed before its first save, a clear error"
  else
    classify ok "$rc" "" "$case_dir/err" ""
    [[ $outcome == ok ]] || detail+=("expected exit 130 after SIGINT")
  fi
  if [[ $outcome == ok || $outcome == clear-error ]] && ((left > 0)); then
    outcome=UNCLEAR
    detail=("$left stale temporaries remain after the next run's saves")
  fi
  report "$outcome" "$desc; temporaries after: $left" "$ms" "${detail[@]}"
done
echo "   ($mid_save of $kills kills landed inside a save, leaving a temporary behind)"

# ------------------------------------------------------------------ 6. divergence
start_group 6 "divergence: stop with the step, the loss and the gradient norm"
DW="diverged|update|loss|gradient norm"
run error "$DW" "--warmup 0 --lr 1000 --steps 50" --warmup 0 --lr 1000 --steps 50 --quiet
run error "$DW" "--warmup 0 --lr 1000 --steps 50 --clip 0" --warmup 0 --lr 1000 --steps 50 --clip 0 --quiet
run error "$DW" "--optimizer sgd --momentum 0.99 --lr 1000 --warmup 0 --steps 50" --optimizer sgd --momentum 0.99 \
  --lr 1000 --warmup 0 --steps 50 --quiet
run error "$DW" "--lr 1000 --eval-every 1 (caught by the held-out loss)" --lr 1000 --eval-every 1 --eval-sequences 16 --quiet
# --lr 1000 --save: diverges before the first evaluation, so no checkpoint may be written.
run error "diverged|no checkpoint" "--lr 1000 --save ck2 (diverges before any save)" --lr 1000 --save ck2 --quiet
ck2=$case_dir/ck2
new_case
if [[ -e $ck2 ]]; then
  report UNCLEAR "ck2 does not exist (the run diverged before its first save)" 0 "but it was written"
else
  report ok "ck2 does not exist (the run diverged before its first save)" 0
fi
# A run that diverges after some saves: its checkpoint keeps the last good step and resumes.
run error "diverged|ck3|keeps step" "--lr 5 --eval-every 1 --save ck3 (diverges after a few saves)" \
  --lr 5 --eval-every 1 --eval-sequences 16 --steps 200 --save ck3 --quiet
ck3=$case_dir/ck3
new_case
t0=$(now_ns)
(cd "$case_dir" && exec timeout 20 "$BIN" --resume "$ck3" --eval-sequences 16 --quiet >out 2>err </dev/null)
rc=$?
ms=$((($(now_ns) - t0) / 1000000))
if [[ ! -e $ck3 ]]; then
  outcome=UNCLEAR detail=("ck3 was not written")
elif ((rc == 1)) && grep -q '^resumed ' "$case_dir/out" && has_words "$case_dir/err" "diverged"; then
  outcome=clear-error detail=() # it loads, continues, and diverges again: a clear stop
else
  classify ok "$rc" "" "$case_dir/err" ""
fi
report "$outcome" "--resume ck3: loads ($(grep -o 'at step [0-9]*' "$case_dir/out" || echo 'no step')), then a clear result" "$ms" "${detail[@]}"

# ------------------------------------------------------------------ 7. config files
# Only for builds whose command line reads TOML files (--config) and writes them (--write-config).
start_group 7 "config files (--config, --write-config): exit non-zero naming the file and key, lose nothing"
if "$BIN" --help 2>/dev/null | grep -q -- '--write-config'; then
  c=$fix/config
  mkdir -p "$c/a-directory"
  mkfifo "$c/fifo"
  toml() { printf '%s\n' "$@" >"$c/$name.toml"; }
  VMEM_KB=$((1024 * 1024)) # reading /dev/zero must end in an error, not in all the memory
  run usage "missing.toml" "--config <missing file>" --config "$c/missing.toml"
  run usage "a-directory" "--config <a directory>" --config "$c/a-directory"
  run usage "fifo" "--config <a FIFO with no writer> (must not block)" --config "$c/fifo"
  run usage "/dev/zero" "--config /dev/zero (under a 1 GiB address-space limit)" --config /dev/zero
  run usage "$CK" "--config <a checkpoint> (binary)" --config "$CK"
  VMEM_KB=""
  name=unknown-key; toml 'colour = "red"'
  run usage "$name.toml|colour" "--config with an unknown key" --config "$c/$name.toml"
  name=lr-text; toml 'lr = "abc"'
  run usage "$name.toml|lr" "--config with lr = \"abc\"" --config "$c/$name.toml"
  name=lr-nan; toml 'lr = nan'
  run usage "$name.toml|lr" "--config with lr = nan" --config "$c/$name.toml"
  name=d-model-big; toml 'd-model = 65537'
  run usage "$name.toml|d-model" "--config with d-model = 65537" --config "$c/$name.toml"
  name=both-norms; toml 'pre-norm = true' 'post-norm = true'
  run usage "pre-norm|post-norm" "--config with pre-norm and post-norm both true" --config "$c/$name.toml"
  name=dup-key; toml 'lr = 0.1' 'lr = 0.2'
  run usage "$name.toml|lr" "--config with lr given twice" --config "$c/$name.toml"
  name=resume-and-model; toml "resume = \"$CK\"" 'd-model = 32'
  run usage "d-model|resume" "--config with resume and d-model" --config "$c/$name.toml"
  name=nested; toml "config = \"$c/unknown-key.toml\""
  run usage "$name.toml|config" "--config whose file names another config" --config "$c/$name.toml"
  name=steps-half; toml 'steps = 1.5'
  run usage "$name.toml|steps" "--config with steps = 1.5" --config "$c/$name.toml"
  # --write-config: refuses to replace what is not its own, like the other outputs.
  reset_outputs
  run fail "notes.txt" "--write-config <a user's text file>" --write-config "$O/notes.txt"
  reset_outputs
  run fail "other.ck" "--write-config <another run's checkpoint>" --write-config "$O/other.ck"
  reset_outputs
  run fail "adir" "--write-config <a directory>" --write-config "$O/adir"
  reset_outputs
  run fail "fifo" "--write-config <a FIFO>" --write-config "$O/fifo"
  PROTECT=() MAYCHANGE=()
  run ok "" "--write-config run.toml --steps 3 --warmup 1 --eval-every 1 --eval-sequences 16" --write-config \
    "$c/run.toml" --steps 3 --warmup 1 --eval-every 1 --eval-sequences 16
  run ok "" "--config run.toml (the written file runs)" --config "$c/run.toml" --quiet
else
  echo "   (skipped: this build has no --write-config)"
fi

# ------------------------------------------------------------------ 9. the GPT-2 workflow
# (before group 8, whose processes need Open MPI)
source "$here/gpt2_cases.sh"

# ------------------------------------------------------------------ 8. processes
source "$here/mpi_cases.sh"

finish_sweep
