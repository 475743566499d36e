// GPT (models/gpt/gpt.h): shapes and causality, the tied vocabulary head (one parameter, its
// gradient the sum of both uses, stored once in a checkpoint and still tied after loading),
// f64 gradient checks of the whole model, nanoGPT's initialisation, and bad input.
#include <boost/test/unit_test.hpp>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "models_support.h"

namespace ag::testing {

BOOST_AUTO_TEST_SUITE(gpt)

BOOST_AUTO_TEST_CASE(logits_are_causal_and_shaped_b_t_vocab) {
  GPT model(small_gpt());
  model.to(DType::f64);
  model.eval();
  const Indices a(Shape{2, 5}, {1, 2, 3, 4, 5, 6, 0, 1, 2, 3});
  Indices b = a;
  b.data[2] = 0;  // batch 0, position 2 changes
  const Tensor la = model(a).value(), lb = model(b).value();
  BOOST_TEST(la.shape() == (Shape{2, 5, 7}));
  // Positions before the change see nothing of it; position 2 and later do; batch 1 is untouched.
  BOOST_TEST(max_abs_diff(la.narrow(1, 0, 2), lb.narrow(1, 0, 2)) == 0.0);
  for (int64_t t = 2; t < 5; ++t) BOOST_TEST(max_abs_diff(la.select(0, 0).select(0, t), lb.select(0, 0).select(0, t)) > 1e-6);
  BOOST_TEST(max_abs_diff(la.select(0, 1), lb.select(0, 1)) == 0.0);
  // A shorter sequence gives the same logits as the prefix of a longer one (positions from 0).
  const Indices prefix(Shape{2, 3}, {1, 2, 3, 6, 0, 1});
  BOOST_TEST(max_abs_diff(model(prefix).value(), la.narrow(1, 0, 3)) < 1e-12);
}

BOOST_AUTO_TEST_CASE(the_loss_in_chunks_is_the_loss_of_the_whole_logits) {
  // A vocabulary of 6000: chunks of linear_cross_entropy_chunk(6000) = 2784 positions, so the
  // 3 x 1024 positions below take two chunks (and the logits are never whole).
  const GPTOptions o{.vocab = 6000, .block_size = 1024, .d_model = 8, .n_head = 2, .n_layers = 1};
  BOOST_REQUIRE(linear_cross_entropy_chunk(o.vocab) < 3 * 1024);
  std::vector<int64_t> ids(3 * 1024), targets(3 * 1024);
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int64_t>(Generator::bits(3, i) % 6000);
    targets[i] = static_cast<int64_t>(Generator::bits(4, i) % 6000);
  }
  const Indices x({3, 1024}, ids), y({3, 1024}, targets);
  for (const int64_t multiple : {1, 64}) {  // 64: the table padded to 6016 rows, never scored
    std::vector<double> losses;
    std::vector<std::vector<Tensor>> grads;
    for (const bool chunked : {false, true}) {
      manual_seed(9);
      GPTOptions padded = o;
      padded.vocab_multiple = multiple;
      GPT gpt(padded);
      gpt.to(DType::f64);
      const Variable loss = chunked ? gpt.loss(x, y) : cross_entropy(gpt(x), y);
      loss.backward();
      losses.push_back(loss.item());
      grads.emplace_back();
      for (const auto& [name, p] : gpt.named_parameters()) grads.back().push_back(p.grad());
    }
    BOOST_TEST(std::abs(losses[0] - losses[1]) <= 1e-12, "vocab_multiple " << multiple);
    for (size_t i = 0; i < grads[0].size(); ++i) BOOST_TEST(max_abs_diff(grads[0][i], grads[1][i]) <= 1e-12);
  }
}

BOOST_AUTO_TEST_CASE(the_head_is_the_token_embedding_one_parameter_named_once) {
  GPT model(small_gpt());
  const NamedVariables params = model.named_parameters();
  std::set<const VariableImpl*> distinct;
  int64_t tables = 0;
  for (const auto& [name, p] : params) {
    distinct.insert(p.id());
    if (p.shape() == Shape{7, 8}) ++tables;
    BOOST_TEST(name.find("head") == std::string::npos, name);
  }
  BOOST_TEST(distinct.size() == params.size());  // no parameter listed twice
  BOOST_TEST(tables == 1);                       // one (vocab, d_model) table: the embedding
  BOOST_TEST(params.front().first == "embed.weight");
  BOOST_TEST(model.head_weight().id() == model.embed().weight().id());
  BOOST_TEST(model.state_dict().size() == params.size());
  // embed 7*8, pos 5*8, per block: attention 4*(8*8+8), MLP 8*32+32+32*8+8, two norms 4*8; final norm 16.
  const int64_t block = 4 * 72 + (256 + 32 + 256 + 8) + 32;
  BOOST_TEST(model.num_parameters() == 56 + 40 + 2 * block + 16);
  // Changing the embedding table changes the head: the logits equal h W^T with the new table.
  model.to(DType::f64);
  model.eval();
  const Indices ids(Shape{1, 4}, {3, 1, 4, 1});
  Variable w = model.embed().weight();
  w.mutable_value().copy_(randn({7, 8}, 5));
  const Tensor h = model.hidden(model.embed()(ids)).value();
  const Tensor expected = kernels::matmul(h, w.value().t());
  BOOST_TEST(max_abs_diff(model(ids).value(), expected) < 1e-12);
}

BOOST_AUTO_TEST_CASE(check_layer_passes_with_the_tied_weight) {
  // dropout 0: the gradient rows see one function; dropout 0.1: also the train/eval rows.
  for (const double p : {0.0, 0.1}) {
    BOOST_TEST_CONTEXT("dropout " << p) {
      GPTOptions o = small_gpt();
      o.dropout = p;
      manual_seed(11);
      GPT model(o);
      const Indices ids(Shape{2, 4}, {1, 2, 3, 1, 6, 0, 5, 5});
      LayerCheckOptions options;
      options.zero_ok = {"w_k.bias"};  // softmax cancels the key bias
      options.make_twin = [o] { return std::make_unique<GPT>(o); };
      const LayerCheckReport r =
          check_layer(model, [ids](GPT& m, const std::vector<Variable>&) { return m(ids); }, {}, options);
      BOOST_TEST(r.ok, r.table());
      BOOST_TEST(r.passed() >= 6);
    }
  }
}

BOOST_AUTO_TEST_CASE(check_layer_passes_on_the_embeddings_input) {
  manual_seed(12);
  GPT model(small_gpt());
  const Variable x = randn_leaf({2, 3, 8}, 13, "x");
  LayerCheckOptions options;
  // Without a token lookup the table serves the head only (T = 3 leaves pos rows 3 and 4 with
  // a zero gradient, as PyTorch's slice of a parameter does).
  options.zero_ok = {"w_k.bias"};
  const LayerCheckReport r = check_layer(
      model, [](GPT& m, const std::vector<Variable>& in) { return m.forward_embedded(in[0]); }, {x}, options);
  BOOST_TEST(r.ok, r.table());
}

BOOST_AUTO_TEST_CASE(the_tied_gradient_is_the_sum_of_both_uses) {
  manual_seed(21);
  GPT model(small_gpt());
  model.to(DType::f64);
  const Indices ids(Shape{2, 5}, {1, 2, 3, 4, 5, 6, 0, 1, 2, 3});
  const Tensor g = randn({2, 5, 7}, 22);  // upstream gradient of the logits
  const Variable& table = model.embed().weight();

  model.zero_grad();
  model(ids).backward(g);
  const Tensor tied = table.grad().clone();

  // forward is exactly head(hidden(lookup)): the pieces below recompose it.
  model.zero_grad();
  model.head(model.hidden(model.embed()(ids))).backward(g);
  BOOST_TEST(max_abs_diff(table.grad(), tied) < 1e-12);

  // Lookup use only: the head multiplies by a detached copy of the table.
  model.zero_grad();
  linear(model.hidden(model.embed()(ids)), Variable(table.value().clone())).backward(g);
  const Tensor lookup = table.grad().clone();

  // Head use only: the lookup reads a detached copy of the table.
  model.zero_grad();
  model.head(model.hidden(embedding(Variable(table.value().clone()), ids))).backward(g);
  const Tensor head = table.grad().clone();

  BOOST_TEST(max_abs_diff(tied, kernels::add(lookup, head)) < 1e-12);
  // Both uses contribute: neither alone is the whole gradient.
  BOOST_TEST(max_abs_diff(tied, lookup) > 1e-3);
  BOOST_TEST(max_abs_diff(tied, head) > 1e-3);
}

// GPT-2's shape: the tanh GELU and a table padded to a multiple. The padding is invisible: the
// logits have vocab columns and equal those of an unpadded model holding the same weights, the
// extra rows get a zero gradient, and the whole model passes check_layer.
BOOST_AUTO_TEST_CASE(a_padded_table_is_invisible_and_gelu_tanh_is_used) {
  GPTOptions o = small_gpt();
  o.activation = Activation::gelu_tanh;
  o.vocab_multiple = 4;
  manual_seed(31);
  GPT padded(o);
  padded.to(DType::f64);
  BOOST_TEST(padded_vocab(o) == 8);
  BOOST_TEST(padded.embed().weight().shape() == Shape({8, 8}));
  GPTOptions plain_options = o;
  plain_options.vocab_multiple = 1;
  GPT plain(plain_options);
  plain.to(DType::f64);
  const NamedVariables from = padded.named_parameters(), to = plain.named_parameters();
  for (size_t i = 0; i < to.size(); ++i) {
    BOOST_TEST_REQUIRE(from[i].first == to[i].first);
    Variable p = to[i].second;
    p.mutable_value().copy_(to[i].first == "embed.weight" ? from[i].second.value().narrow(0, 0, 7) : from[i].second.value());
  }
  const Indices ids(Shape{2, 4}, {1, 2, 3, 1, 6, 0, 5, 5});
  const Variable logits = padded(ids);
  BOOST_TEST(logits.shape() == Shape({2, 4, 7}));
  BOOST_TEST(max_abs_diff(logits.value(), plain(ids).value()) < 1e-12);
  padded.zero_grad();
  logits.backward(randn({2, 4, 7}, 32));
  const Tensor grad = padded.embed().weight().grad();
  BOOST_TEST(kernels::amax(kernels::unary(kernels::UnaryOp::abs, grad.narrow(0, 7, 1)), {}).item() == 0.0);
  BOOST_TEST(kernels::amax(kernels::unary(kernels::UnaryOp::abs, grad.narrow(0, 0, 7)), {}).item() > 0.0);
  // The activation is the tanh form: the exact GELU's model gives other logits.
  GPTOptions exact_options = plain_options;
  exact_options.activation = Activation::gelu;
  GPT exact(exact_options);
  exact.to(DType::f64);
  exact.load_state_dict(plain.state_dict());
  BOOST_TEST(max_abs_diff(exact(ids).value(), logits.value()) > 1e-9);

  LayerCheckOptions options;
  options.zero_ok = {"w_k.bias"};
  options.make_twin = [o] { return std::make_unique<GPT>(o); };
  const LayerCheckReport r = check_layer(padded, [ids](GPT& m, const std::vector<Variable>&) { return m(ids); }, {}, options);
  BOOST_TEST(r.ok, r.table());
}

BOOST_AUTO_TEST_CASE(a_checkpoint_holds_the_tied_weight_once_and_reloads_tied) {
  const auto path = std::filesystem::temp_directory_path() / ("attograd_gpt_" + std::to_string(::getpid()) + ".safetensors");
  manual_seed(31);
  GPT saved(small_gpt());
  save_checkpoint(path.string(), saved.named_parameters(), {}, GeneratorState{}, 0);
  const SafetensorsFile file = load_safetensors(path.string());
  int64_t tables = 0;
  for (const SafetensorsEntry& e : file.entries) tables += e.shape() == Shape{7, 8} ? 1 : 0;
  BOOST_TEST(tables == 1);
  BOOST_TEST(file.contains("embed.weight"));
  BOOST_TEST(static_cast<int64_t>(file.entries.size()) == static_cast<int64_t>(saved.named_parameters().size()));

  manual_seed(32);  // another init: every value must come from the file
  GPT loaded(small_gpt());
  const Indices ids(Shape{1, 5}, {6, 5, 4, 3, 2});
  BOOST_TEST(max_abs_diff(saved(ids).value(), loaded(ids).value()) > 1e-4);
  load_checkpoint(path.string(), loaded.named_parameters());
  std::filesystem::remove(path);
  BOOST_TEST(loaded.head_weight().id() == loaded.embed().weight().id());
  BOOST_TEST(max_abs_diff(saved(ids).value(), loaded(ids).value()) == 0.0);
  // Still one tensor in two places: an optimizer step on it moves both uses together.
  AdamW opt(loaded.named_parameters(), AdamWOptions{});
  cross_entropy(loaded(ids), Indices(Shape{1, 5}, {5, 4, 3, 2, 1})).backward();
  opt.step();
  BOOST_TEST(max_abs_diff(loaded.head_weight().value(), loaded.embed().weight().value()) == 0.0);
  BOOST_TEST(max_abs_diff(loaded.embed().weight().value(), saved.embed().weight().value()) > 0.0);
}

BOOST_AUTO_TEST_CASE(init_is_nanogpts_so_the_first_loss_is_about_log_vocab) {
  GPTOptions o{.vocab = 65, .block_size = 16, .d_model = 32, .n_head = 4, .n_layers = 3};
  manual_seed(41);
  GPT model(o);
  const auto std_of = [](const Tensor& t) {
    double sum = 0, sq = 0;
    for (double v : t.to_vector()) sum += v, sq += v * v;
    const double n = static_cast<double>(t.numel());
    return std::sqrt(sq / n - (sum / n) * (sum / n));
  };
  BOOST_TEST(std_of(model.embed().weight().value()) == 0.02, boost::test_tools::tolerance(0.1));
  BOOST_TEST(std_of(model.block(0).attn().w_q().weight().value()) == 0.02, boost::test_tools::tolerance(0.1));
  const double residual = 0.02 / std::sqrt(6.0);
  BOOST_TEST(std_of(model.block(2).attn().w_o().weight().value()) == residual, boost::test_tools::tolerance(0.1));
  PositionwiseFeedForward& ff1 = model.block(1).ff_as<PositionwiseFeedForward>();
  BOOST_TEST(std_of(ff1.linear2().weight().value()) == residual, boost::test_tools::tolerance(0.1));
  for (double v : ff1.linear1().bias().value().to_vector()) BOOST_TEST(v == 0.0);
  // Small logits at the start: the loss of random targets is close to log(vocab).
  std::vector<int64_t> ids(4 * 16), targets(4 * 16);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 7) % 65), targets[i] = static_cast<int64_t>((i * 11 + 3) % 65);
  const double loss = cross_entropy(model(Indices(Shape{4, 16}, ids)), Indices(Shape{4, 16}, targets)).item();
  BOOST_TEST(std::abs(loss - std::log(65.0)) < 0.05, "first loss " << loss);
  // Same seed, same model.
  manual_seed(41);
  GPT twin(o);
  BOOST_TEST(max_abs_diff(twin.block(2).ff_as<PositionwiseFeedForward>().linear1().weight().value(),
                          model.block(2).ff_as<PositionwiseFeedForward>().linear1().weight().value()) == 0.0);
}

BOOST_AUTO_TEST_CASE(bad_options_and_input_are_refused) {
  const auto with = [](auto change) {
    GPTOptions o = small_gpt();
    change(o);
    return o;
  };
  AG_CHECK_THROWS_WITH(GPT(with([](GPTOptions& o) { o.vocab = 0; })), std::invalid_argument, "GPT", "vocab", "0");
  AG_CHECK_THROWS_WITH(GPT(with([](GPTOptions& o) { o.n_head = 3; })), std::invalid_argument, "n_head 3", "d_model 8");
  AG_CHECK_THROWS_WITH(GPT(with([](GPTOptions& o) { o.block_size = -1; })), std::invalid_argument, "block_size", "-1");
  AG_CHECK_THROWS_WITH(GPT(with([](GPTOptions& o) { o.dropout = 1.0; })), std::invalid_argument, "dropout", "[0, 1)");
  GPT model(small_gpt());
  AG_CHECK_THROWS_WITH(model(Indices(Shape{1, 3}, {1, 7, 2})), std::invalid_argument, "token id 7", "(0, 1)",
                       "vocab=7");
  AG_CHECK_THROWS_WITH(model(Indices(Shape{1, 3}, {1, -1, 2})), std::invalid_argument, "token id -1");
  AG_CHECK_THROWS_WITH(model(Indices(Shape{1, 6}, {1, 1, 1, 1, 1, 1})), std::invalid_argument, "(1, 6)",
                       "block_size=5");
  AG_CHECK_THROWS_WITH(model(Indices(Shape{6}, {1, 1, 1, 1, 1, 1})), std::invalid_argument, "(6,)", "(B, T)");
  AG_CHECK_THROWS_WITH(model.forward_embedded(Variable(zeros({1, 3, 9}))), std::invalid_argument, "(1, 3, 9)",
                       "d_model=8");
  AG_CHECK_THROWS_WITH(model.forward_embedded(Variable(zeros({1, 3, 8}, DType::f64))), std::invalid_argument,
                       "f64", "f32");
  AG_CHECK_THROWS_WITH(model.head(Variable(zeros({2, 4}))), std::invalid_argument, "GPT::head", "(2, 4)");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
