#!/usr/bin/env bash
# Reruns the commands behind the figures quoted in README.md and docs/ and compares them with the
# text: docs/check.sh [--long] [--build DIR] [--list] [FILE...]. How a figure is marked for checking,
# and what is compared, is at the top of docs/check.py.
exec /usr/bin/python3 "$(dirname "$0")/check.py" "$@"
