// attograd: the framework in one include, <attograd.h>: the tensor, autograd, the layers and the
// training loop. Each header can also be included on its own as <attograd/<folder>/<file>.h>;
// the tooling (text/, models/<family>/) is included header by header and linked as its own
// libraries (attograd-text, attograd-models).
#pragma once

// core: tensors and the derivative-free tensor math an op is written with
#include "attograd/core/indices.h"
#include "attograd/core/kernels.h"
#include "attograd/core/quantize.h"
#include "attograd/core/rng.h"
#include "attograd/core/tensor.h"
#include "attograd/core/threads.h"

// autograd: Variables, the engine, the differentiable ops and their composed twins, checks
#include "attograd/autograd/attention_mask.h"
#include "attograd/autograd/composed.h"
#include "attograd/autograd/grad_mode.h"
#include "attograd/autograd/gradcheck.h"
#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops.h"
#include "attograd/autograd/profiler.h"
#include "attograd/autograd/recompute.h"
#include "attograd/autograd/variable.h"

// layers
#include "attograd/layers/activation.h"
#include "attograd/layers/attention.h"
#include "attograd/layers/attention_mask.h"
#include "attograd/layers/check_layer.h"
#include "attograd/layers/decoding.h"
#include "attograd/layers/dropout.h"
#include "attograd/layers/embedding.h"
#include "attograd/layers/feed_forward.h"
#include "attograd/layers/grouped_attention.h"
#include "attograd/layers/init.h"
#include "attograd/layers/kv_cache.h"
#include "attograd/layers/layer_norm.h"
#include "attograd/layers/linear.h"
#include "attograd/layers/llama_block.h"
#include "attograd/layers/lora.h"
#include "attograd/layers/module.h"
#include "attograd/layers/positional.h"
#include "attograd/layers/rms_norm.h"
#include "attograd/layers/rotary.h"
#include "attograd/layers/sequential.h"
#include "attograd/layers/sublayer.h"
#include "attograd/layers/swiglu.h"
#include "attograd/layers/transformer.h"
#include "attograd/layers/transformer_decoder.h"

// train: the loop and what it uses: losses, metrics, optimizers, schedules, checkpoints,
// data parallelism, the reports
#include "attograd/train/clip.h"
#include "attograd/train/finetune.h"
#include "attograd/train/dist/communicator.h"
#include "attograd/train/dist/data_parallel.h"
#include "attograd/train/io/checkpoint.h"
#include "attograd/train/io/safetensors.h"
#include "attograd/train/job.h"
#include "attograd/train/losses.h"
#include "attograd/train/memory.h"
#include "attograd/train/metrics.h"
#include "attograd/train/observer.h"
#include "attograd/train/optim.h"
#include "attograd/train/report/metrics_log.h"
#include "attograd/train/report/observers.h"
#include "attograd/train/report/plot.h"
#include "attograd/train/report/progress.h"
#include "attograd/train/report/run_clock.h"
#include "attograd/train/schedule.h"
#include "attograd/train/trainer.h"
#include "attograd/train/update.h"
