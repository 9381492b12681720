#!/usr/bin/env bash
# Mutation testing of the protocol core, as a habit: cargo-mutants (crates.io) plants one
# fault at a time in src/replica/, src/controller/, src/epoch_cache.rs and src/log.rs and
# runs the core's tests (package isr) and the model checker's (package isr-models, which
# includes every preset of the suite at its CI bounds: models/tests/presets.rs) against each.
# A mutant no test fails is "missed": strengthen a preset or a test, or argue it equivalent in
# spec/checker.md.
#
#   checker/mutants.sh                          # every mutant (hours on 2 shared cores)
#   checker/mutants.sh --in-diff changes.diff   # only mutants on the lines a diff changes
#   checker/mutants.sh --file src/epoch_cache.rs --list   # what would be tried
#
# One job at a time and release builds (the model checker is slow in debug); results land in
# mutants.out/ (caught.txt, missed.txt, timeout.txt, unviable.txt). Extra arguments go to
# cargo-mutants.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo mutants --version >/dev/null 2>&1; then
  cargo install --locked cargo-mutants
fi
files=()
case " $* " in
  *" --file "* | *" -f "*) ;;
  *) files=(--file 'src/replica/*.rs' --file 'src/controller/*.rs' --file src/epoch_cache.rs --file src/log.rs) ;;
esac
exec cargo mutants \
  --jobs 1 \
  --profile release \
  --test-package isr --test-package isr-models \
  --timeout-multiplier 3 \
  "${files[@]}" "$@"
