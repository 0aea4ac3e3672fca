# Sourced by scripts/demo.sh and scripts/demo-pi05.sh (and cmd/tt-model's TestDemoWeightsLeaveTheUserCache):
#
#   demo_weights TT MANIFEST REPO REV DEMO_HF_HOME MAKE_CHECKPOINT
#
# uses the pinned weights REPO@REV of MANIFEST when the user's Hugging Face cache already holds them
# (real ones: a snapshot marked as generated test weights is never used), else stands in a generated
# checkpoint in a Hugging Face cache of the demo's own, DEMO_HF_HOME: MAKE_CHECKPOINT DIR writes it
# into DIR (marked, see hub.TestWeightsFile), `tt-model weights import` stores it there once, and
# HF_HOME is exported so that every later step (package, serve) reads that cache, and
# demo_test_weights is set to 1. The user's cache is only read, never written.
demo_weights() {
  local tt=$1 manifest=$2 repo=$3 rev=$4 demo_hf=$5 make_checkpoint=$6
  local pull found=
  demo_test_weights=
  if pull=$(HF_HUB_OFFLINE=1 "$tt" weights pull "$manifest" 2>&1); then found=1; fi
  if [ -n "$found" ] && ! grep -q 'random test weights' <<<"$pull"; then
    echo "the pinned snapshot is in your Hugging Face cache: using it"
    return 0
  fi
  if [ -n "$found" ]; then
    cat <<MSG
  Your Hugging Face cache holds random test weights at $repo@$rev (stored by an earlier
  demo): they are not used. \`tt-model weights pull --refresh $manifest\` replaces them with the
  real files once the Hub can be reached; \`tt-model rm --weights $repo@$rev\` removes them.
MSG
  fi
  demo_test_weights=1
  mkdir -p "$demo_hf"
  export HF_HOME=$demo_hf HF_HUB_CACHE=
  if HF_HUB_OFFLINE=1 "$tt" weights pull "$manifest" >/dev/null 2>&1; then
    echo "  random test weights from the demo's own Hugging Face cache $demo_hf (your cache is not touched)"
    return 0
  fi
  local dir
  dir=$(mktemp -d)
  "$make_checkpoint" "$dir"
  "$tt" weights import "$dir" "$repo@$rev"
  rm -rf "$dir"
  echo "  random test weights stored in the demo's own Hugging Face cache $demo_hf (your cache is not touched)"
}
