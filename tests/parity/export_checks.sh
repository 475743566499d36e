# Sourced (after in_scratch_directory.sh) by the tests that hold an export to PyTorch's reading of
# it: skips (77) without PyTorch, writes the shared text, and gives the helpers below.
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "SKIP: no PyTorch for /usr/bin/python3"; exit 77; }

stride=12 window=32
for i in $(seq 1 120); do echo "line $i: the cat sat on the mat, and the dog ran after $((i * 7 % 13)) birds."; done >text.txt

# run LABEL PROGRAM ARGS...: the program's output in LABEL.txt; a failure ends the test, since
# every later step reads what this one wrote.
run() {
  local label=$1 status=0
  shift
  "$@" >"$label.txt" 2>&1 || status=$?
  if [ "$status" -ne 0 ]; then
    cat "$label.txt"
    fail "$label: exit $status"
    finish
    exit 1
  fi
}
# relative A B: |A - B| / |B|.
relative() { /usr/bin/python3 -c "import sys; a, b = map(float, sys.argv[1:]); print(abs(a - b) / abs(b))" "$1" "$2"; }
# at_most X LIMIT: X <= LIMIT, as numbers.
at_most() { /usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)" "$1" "$2"; }
