// StopOnSignals: SIGINT, SIGTERM and SIGHUP each stop a run after the current update, which is
// saved; the summary carries the signal and the exit status is 128 + it; the previous handlers
// come back; the same for a request that other work polls. The ranks' agreement in a world of one, and the configuration's items. Across real
// processes (mpirun, a signal to mpirun, mismatched ranks): tests/mpi/run_rank_checks.sh.
#include <csignal>

#include "attograd/models/toy/sequence_job.h"
#include "attograd/train/io/checkpoint.h"
#include "attograd/train/stop_signals.h"
#include "attograd/train/trainer.h"
#include "support.h"
#include "train_support.h"

namespace ag::testing {
namespace {

volatile std::sig_atomic_t g_previous_handler_ran = 0;
extern "C" void previous_handler(int) { g_previous_handler_ran = 1; }

}  // namespace

BOOST_AUTO_TEST_SUITE(stop_signals)

BOOST_AUTO_TEST_CASE(each_stop_signal_ends_the_run_after_the_update_saves_and_sets_the_status) {
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) {
    BOOST_TEST_CONTEXT("signal " << signal) {
      TempDir dir;
      manual_seed(7);
      SequenceModel model({.vocab = 6, .max_len = 6, .d_model = 16, .n_head = 2, .d_ff = 32, .n_layers = 1});
      SequenceJob job(model, {.kind = SequenceTaskKind::reverse, .vocab_size = 6, .seq_len = 6, .batch_size = 8, .seed = 3},
                      16);
      TrainerOutputs out;
      out.checkpoint_path = dir.file("run.safetensors");
      out.on_step = [signal](int64_t step, double) {
        if (step == 3) std::raise(signal);
      };
      Trainer trainer(job, {.warmup_steps = 2, .steps = 50, .eval_every = 100, .target_seq_acc = 2.0}, out);
      std::signal(signal, previous_handler);
      g_previous_handler_ran = 0;
      TrainSummary s;
      {
        const StopOnSignals stop(trainer);
        BOOST_CHECK_THROW(StopOnSignals{trainer}, std::logic_error);  // one at a time
        s = trainer.run();
      }
      BOOST_TEST(s.interrupted);
      BOOST_TEST(s.steps == 3);
      BOOST_TEST(s.stop_signal == signal);
      BOOST_TEST(interrupted_exit_status(s) == 128 + signal);
      BOOST_TEST(is_interrupted_exit_status(128 + signal));
      BOOST_TEST(checkpoint_step(Checkpoint::open(dir.file("run.safetensors"))) == 3);
      BOOST_TEST(g_previous_handler_ran == 0);  // ours answered while it lived
      std::raise(signal);                       // and the previous one is back
      BOOST_TEST(g_previous_handler_ran == 1);
      std::signal(signal, SIG_DFL);
    }
  }
  TrainSummary plain;
  plain.interrupted = true;
  BOOST_TEST(interrupted_exit_status(plain) == 130);  // request_stop() without a signal: as Ctrl-C
  BOOST_TEST(!is_interrupted_exit_status(1));
}

// Work that is not a training run (prepare_text) polls a request instead: the first signal is
// stored there, a second one of the same kind would end the process, and the previous handler
// comes back after. While one is alive no other may be made, of either form.
BOOST_AUTO_TEST_CASE(a_request_records_the_first_signal_for_work_that_polls_it) {
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) {
    BOOST_TEST_CONTEXT("signal " << signal) {
      std::signal(signal, previous_handler);
      g_previous_handler_ran = 0;
      std::atomic<int> request{0};
      {
        const StopOnSignals stop(request);
        std::atomic<int> other{0};
        BOOST_CHECK_THROW(StopOnSignals{other}, std::logic_error);
        BOOST_TEST(request.load() == 0);
        std::raise(signal);
        BOOST_TEST(request.load() == signal);
        BOOST_TEST(std::signal(signal, SIG_IGN) == SIG_DFL);  // a second one would end the process
      }
      BOOST_TEST(g_previous_handler_ran == 0);
      std::raise(signal);  // the previous handler is back
      BOOST_TEST(g_previous_handler_ran == 1);
      std::signal(signal, SIG_DFL);
    }
  }
}

// nohup's SIGHUP, a script's SIGINT to its background jobs: a signal the process started with
// ignored stays ignored while the work runs, and the others still stop it.
BOOST_AUTO_TEST_CASE(a_signal_ignored_at_start_stays_ignored) {
  for (const int ignored : {SIGINT, SIGTERM, SIGHUP}) {
    BOOST_TEST_CONTEXT("ignored " << ignored) {
      std::signal(ignored, SIG_IGN);
      std::atomic<int> request{0};
      {
        const StopOnSignals stop(request);
        std::raise(ignored);
        BOOST_TEST(request.load() == 0);
        const int other = ignored == SIGHUP ? SIGTERM : SIGHUP;
        std::raise(other);
        BOOST_TEST(request.load() == other);
      }
      BOOST_TEST(std::signal(ignored, SIG_DFL) == SIG_IGN);  // left as it was found
      for (const int s : {SIGINT, SIGTERM, SIGHUP}) std::signal(s, SIG_DFL);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_configuration_identity_leaves_out_what_may_differ_between_ranks) {
  const std::string toml =
      "# attograd configuration\n\n# width\nd-model=32\nlayers = 2\nthreads=\"auto\"\nsave=\"a.st\"\n"
      "data=\"text.txt\"\nlog=\"runs/metrics.jsonl\"\nquiet=false\n";
  const RunIdentity id = configuration_identity(toml);
  // --data is compared by the text's checksum (the job's "data" entry), not by its path.
  const RunIdentity expected{{"--d-model", "32"}, {"--layers", "2"}};
  BOOST_TEST((id == expected));
  require_same_identity(Communicator::world(), id);  // alone: nothing to disagree with
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
