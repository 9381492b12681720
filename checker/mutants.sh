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
#   checker/mutants.sh --in-place --baseline skip --file src/log.rs   # fast, on a built tree
#   checker/mutants.sh --suite --in-place --baseline skip --shard 0/8 --sharding round-robin
#                                               # the suite alone as the test step, on a sample
#
# With --suite the test step is the suite alone (models/tests/presets.rs'
# every_preset_is_as_expected_at_its_bounds: each preset at its CI bounds, as `isr-check suite`
# runs them), which says how much the model checker catches by itself.
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
# In place (--in-place), mutants reuse this tree's warm release build instead of a cold copy's
# minutes, and build it incrementally: a mutant rebuilds in 6–22 s instead of 52–64 (the
# workspace's crates are rebuilt once on the way in and once after). The tree is restored after
# each mutant. One job at a time either way.
jobs=(--jobs 1)
case " $* " in *" --in-place "*) jobs=() && export CARGO_PROFILE_RELEASE_INCREMENTAL=true ;; esac
# A mutant that hangs the search is caught by the timeout: without a baseline run to scale from,
# 300 s is two and a half times what a passing test run takes (about 120 s, the presets 96 s of it).
timeout=(--timeout-multiplier 3)
case " $* " in *" --baseline skip "* | *" --baseline=skip "*) timeout=(--timeout 300) ;; esac
# A caught mutant needs one failing case, not the smallest: proptest skips shrinking.
export PROPTEST_MAX_SHRINK_ITERS=0
tests=(--test-package isr --test-package isr-models)
suite=()
args=()
for a in "$@"; do
  if [ "$a" = --suite ]; then
    tests=(--test-package isr-models)
    suite=(-- --test presets -- --exact every_preset_is_as_expected_at_its_bounds)
  else
    args+=("$a")
  fi
done
exec cargo mutants \
  "${jobs[@]}" \
  --profile release \
  "${tests[@]}" \
  "${timeout[@]}" \
  "${files[@]}" "${args[@]}" "${suite[@]}"
