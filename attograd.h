// attograd: the whole public API in one include, <attograd.h>. Each header can also be
// included on its own as <attograd/<folder>/<file>.h>.
#pragma once

// core: tensors and the derivative-free tensor math an op is written with
#include "attograd/core/indices.h"
#include "attograd/core/kernels.h"
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
#include "attograd/autograd/variable.h"

// layers
#include "attograd/layers/activation.h"
#include "attograd/layers/attention.h"
#include "attograd/layers/attention_mask.h"
#include "attograd/layers/check_layer.h"
#include "attograd/layers/dropout.h"
#include "attograd/layers/embedding.h"
#include "attograd/layers/feed_forward.h"
#include "attograd/layers/kv_cache.h"
#include "attograd/layers/layer_norm.h"
#include "attograd/layers/linear.h"
#include "attograd/layers/module.h"
#include "attograd/layers/positional.h"
#include "attograd/layers/sequential.h"
#include "attograd/layers/sublayer.h"
#include "attograd/layers/transformer.h"
#include "attograd/layers/transformer_decoder.h"

// models: complete networks
#include "attograd/models/generate.h"
#include "attograd/models/gpt.h"
#include "attograd/models/seq2seq.h"
#include "attograd/models/seq2seq_decode.h"
#include "attograd/models/sequence_model.h"
#include "attograd/train/clip.h"
#include "attograd/train/data/seq2seq_tasks.h"
#include "attograd/train/data/sequence_tasks.h"
#include "attograd/train/data/text.h"
#include "attograd/train/dist/communicator.h"
#include "attograd/train/dist/data_parallel.h"
#include "attograd/train/gpt_job.h"
#include "attograd/train/io/checkpoint.h"
#include "attograd/train/io/model_options.h"
#include "attograd/train/io/safetensors.h"
#include "attograd/train/job.h"
#include "attograd/train/losses.h"
#include "attograd/train/optim.h"
#include "attograd/train/report/metrics_log.h"
#include "attograd/train/report/plot.h"
#include "attograd/train/report/progress.h"
#include "attograd/train/report/run_clock.h"
#include "attograd/train/schedule.h"
#include "attograd/train/seq2seq_job.h"
#include "attograd/train/sequence_job.h"
#include "attograd/train/trainer.h"
#include "attograd/train/update.h"

// train: losses, optimizers, schedules, data, the trainer, checkpoints
