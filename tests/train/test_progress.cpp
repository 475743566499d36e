// The progress line: its text, in-place redraws on a terminal, periodic plain lines otherwise.
// Times are passed in, never measured.
#include <sstream>

#include "attograd/train/report/progress.h"
#include "support.h"

namespace ag::testing {
namespace {

ProgressInfo info_at(int64_t step, double elapsed) {
  ProgressInfo i;
  i.step = step;
  i.total_steps = 200;
  i.loss = 0.81234;
  i.token_acc = 0.713;
  i.seq_acc = 0.125;
  i.tokens_per_s = 48200;
  i.elapsed_s = elapsed;
  return i;
}

size_t count(const std::string& text, char c) { return static_cast<size_t>(std::count(text.begin(), text.end(), c)); }

}  // namespace

BOOST_AUTO_TEST_SUITE(progress)

BOOST_AUTO_TEST_CASE(line_shows_step_loss_accuracy_speed_and_eta) {
  // 50 of 200 steps in 10 s: 150 more at 5 steps/s is 30 s.
  BOOST_TEST(format_progress_line(info_at(50, 10.0)) ==
             "step  50/200  25% | loss 0.8123 | acc tok 71.3% seq 12.5% | 48.2k tok/s | 10.0s | ETA 30.0s");
  BOOST_TEST(format_progress_line(info_at(200, 40.0)).ends_with("| 40.0s | done"));
  ProgressInfo bare;
  bare.step = 0;
  bare.total_steps = 10;
  BOOST_TEST(format_progress_line(bare) == "step  0/10   0% | 0.0s");
  bare.step = 1;
  bare.seq_acc = 0.5;
  bare.elapsed_s = 2;
  BOOST_TEST(format_progress_line(bare) == "step  1/10  10% | acc seq 50.0% | 2.0s | ETA 18.0s");
}

// A language model's line: the training loss and the latest validation loss side by side.
BOOST_AUTO_TEST_CASE(line_shows_the_validation_loss_when_there_is_one) {
  ProgressInfo lm;
  lm.step = 100;
  lm.total_steps = 300;
  lm.loss = 2.67871;
  lm.val_loss = 2.64712;
  lm.tokens_per_s = 6600;
  lm.elapsed_s = 62;
  BOOST_TEST(format_progress_line(lm) == "step 100/300  33% | loss 2.6787 | val 2.6471 | 6.6k tok/s | 1m02s | ETA 2m04s");
  // The same validation loss in bits per byte of text, after it.
  lm.val_bits_per_byte = 3.81903;
  BOOST_TEST(format_progress_line(lm) ==
             "step 100/300  33% | loss 2.6787 | val 2.6471 = 3.8190 bpb | 6.6k tok/s | 1m02s | ETA 2m04s");
}

BOOST_AUTO_TEST_CASE(durations_and_rates) {
  BOOST_TEST(format_duration(0.84) == "0.8s");
  BOOST_TEST(format_duration(59.94) == "59.9s");
  BOOST_TEST(format_duration(187) == "3m07s");
  BOOST_TEST(format_duration(7500) == "2h05m");
  BOOST_TEST(format_duration(-1) == "?");
  BOOST_TEST(format_duration(NAN) == "?");
  BOOST_TEST(format_rate(512) == "512");
  BOOST_TEST(format_rate(48200) == "48.2k");
  BOOST_TEST(format_rate(1.35e6) == "1.35M");
}

BOOST_AUTO_TEST_CASE(terminal_mode_redraws_in_place) {
  std::ostringstream out;
  {
    ProgressDisplay display(out, true, 100, 0.5);
    display.update(info_at(1, 0.1));   // first: drawn
    display.update(info_at(2, 0.2));   // 0.1 s later: skipped
    display.update(info_at(3, 0.7));   // 0.6 s after the last draw: drawn
    display.update(info_at(200, 0.8));  // the last step: always drawn
    display.finish();
    display.finish();  // idempotent
  }
  const std::string text = out.str();
  BOOST_TEST(count(text, '\r') == 3u);
  BOOST_TEST(count(text, '\n') == 1u);  // only finish() ends the line
  BOOST_TEST(text.find("step   1/200") != std::string::npos);
  BOOST_TEST(text.find("step   2/200") == std::string::npos);
  BOOST_TEST(text.find("step   3/200") != std::string::npos);
  // The last line is shorter than the one before: blanked with spaces, then the newline.
  const std::string last = text.substr(text.rfind('\r') + 1);
  BOOST_TEST(last.substr(0, last.find_last_not_of(" \n") + 1).ends_with("| done"));
  BOOST_TEST(last.ends_with(" \n"));
}

BOOST_AUTO_TEST_CASE(shorter_line_blanks_the_rest_of_the_longer_one) {
  std::ostringstream out;
  ProgressDisplay display(out, true, 100, 0.0);
  ProgressInfo longer = info_at(1, 0.1);
  ProgressInfo shorter = longer;
  shorter.token_acc = ProgressInfo::kMissing;
  shorter.step = 2;
  display.update(longer);
  display.update(shorter);
  const size_t long_width = format_progress_line(longer).size();
  const std::string text = out.str();
  const std::string second = text.substr(text.rfind('\r') + 1);
  BOOST_TEST(second.size() == long_width);
  BOOST_TEST(second.ends_with(" "));
}

BOOST_AUTO_TEST_CASE(messages_do_not_garble_the_line) {
  std::ostringstream out;
  ProgressDisplay display(out, true, 100, 10.0);
  display.update(info_at(1, 0.1));
  display.message("eval: seq acc 50%");
  display.update(info_at(2, 0.2));  // redrawn although within the interval: the line was cleared
  display.finish();
  const std::string text = out.str();
  const size_t msg = text.find("eval: seq acc 50%\n");
  BOOST_REQUIRE(msg != std::string::npos);
  BOOST_TEST(text.substr(0, msg).ends_with("\r"));  // cleared, back at the start of the line
  BOOST_TEST(text.find("step   2/200", msg) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(plain_mode_prints_periodic_lines) {
  std::ostringstream out;
  {
    ProgressDisplay display(out, false, 50);
    for (int64_t s = 1; s <= 200; ++s) display.update(info_at(s, 0.1 * static_cast<double>(s)));
    display.message("finished");
  }
  const std::string text = out.str();
  BOOST_TEST(count(text, '\r') == 0u);
  BOOST_TEST(count(text, '\n') == 5u);  // steps 50, 100, 150, 200 and the message
  BOOST_TEST(text.find("step  50/200") != std::string::npos);
  BOOST_TEST(text.find("step  51/200") == std::string::npos);
  BOOST_TEST(text.ends_with("finished\n"));
}

BOOST_AUTO_TEST_CASE(invalid_settings) {
  std::ostringstream out;
  AG_CHECK_THROWS_WITH(ProgressDisplay(out, false, 0), std::invalid_argument, "plain_every", "0");
  AG_CHECK_THROWS_WITH(ProgressDisplay(out, true, 1, -1.0), std::invalid_argument, "redraw_interval_s");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
