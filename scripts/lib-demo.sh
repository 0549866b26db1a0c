# Sourced by demo.sh and ablations.sh: the demo's warm start and servers.
# Needs lib-serve.sh.

cfg=configs/demo.yaml
# DEMO_NAME names the runs (runs/$demo, runs/$demo-single, …), so that a
# variant of the demo can run beside it.
demo=${DEMO_NAME:-demo}
work=runs/$demo-work
t0=$(date +%s)

stamp() { echo "== [$(( $(date +%s) - t0 ))s] $*"; }

# warm_start: a byte-level BPE tokenizer trained on the demonstrations'
# text, a random tiny Qwen3-shaped model, and the SFT warm start once per
# mode (runs/$demo-sft-multi, runs/$demo-sft-single), each merged into the
# weights. Steps already done are skipped. Arguments are key=value
# overrides (the sft: section's, for one).
warm_start() {
  mkdir -p "$work"
  if [ ! -f "$work/model/config.json" ]; then
    stamp "tokenizer corpus and a random tiny model"
    bin/troupe sft "$cfg" name=$demo-corpus "sft.modes=[single,multi]" "$@" --corpus "$work/corpus.txt"
    bin/troupe model init --out "$work/model" --layers 2 --dim 128 --heads 4 --kv-heads 2 --ff 384 \
      --vocab 1024 --init-std 0.3 --corpus "$work/corpus.txt" --seed 1 --force
  fi
  local mode
  for mode in multi single; do
    if [ ! -f "runs/$demo-sft-$mode/sft/model/config.json" ]; then
      stamp "SFT warm start, $mode"
      bin/troupe sft "$cfg" name=$demo-sft-$mode env.mode=$mode generation.model="$work/model" \
        learner.lora_rank=64 learner.lora_alpha=64 "$@"
    fi
  done
}

# serve_warm: serves both warm-started models; sets $multi_args and
# $single_args, the generation overrides that point a run at each.
serve_warm() {
  serve_model runs/$demo-sft-multi/sft/model demo-multi "$work/serve-multi.log"
  multi_args=("generation.base_urls=[$url/v1]" generation.model=demo-multi generation.tokenizer=runs/$demo-sft-multi/sft/model)
  serve_model runs/$demo-sft-single/sft/model demo-single "$work/serve-single.log"
  single_args=("generation.base_urls=[$url/v1]" generation.model=demo-single generation.tokenizer=runs/$demo-sft-single/sft/model)
}
