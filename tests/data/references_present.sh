# Sourced by the byte-pair encoding tests that compare with node references. Its
# require_node_packages checks that node and the npm packages named are there; references_missing
# says how to install what is not and exits: 77 (meson's "skipped") on a developer's machine,
# 1 (failed) in CI, where tests/data/install_references.sh has run and a missing reference is a
# broken set-up.
npm_dir=${ATTOGRAD_NPM:-$HOME/.cache/attograd/npm}
export NODE_PATH=$npm_dir/node_modules
references_missing() {
  echo "$(basename "$0"): $1; install the references with tests/data/install_references.sh --apt" >&2
  if [ "${CI:-}" = "true" ]; then exit 1; fi
  exit 77
}
require_node_packages() {
  command -v node >/dev/null || references_missing "node is not installed"
  local package
  for package in "$@"; do
    [ -d "$npm_dir/node_modules/$package" ] || references_missing "the npm package $package is not in $npm_dir"
  done
}
