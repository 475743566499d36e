// Storage's block cache: the byte counts it reports, reuse of a freed block of the same size,
// large blocks built from the pages of cached blocks of other sizes, and the bound on cached
// small blocks (a miss gives back blocks of other sizes instead of letting the process hold
// every size's high-water mark at once).
#include <algorithm>
#include <vector>

#include "attograd/core/storage.h"
#include "support.h"

namespace ag::testing {
namespace {

constexpr std::size_t kMB = std::size_t{1} << 20;

}  // namespace

BOOST_AUTO_TEST_SUITE(storage)

BOOST_AUTO_TEST_CASE(live_bytes_follow_tensors_rounded_to_the_alignment) {
  const MemoryStats before = memory_stats();
  {
    const Tensor t({1000}, DType::f32);  // 4000 bytes -> 4032 (63 * 64)
    const MemoryStats during = memory_stats();
    BOOST_TEST(during.live - before.live == 4032u);
    BOOST_TEST(during.peak_live >= during.live);
    BOOST_TEST(during.peak_held >= during.live + during.cached);
  }
  BOOST_TEST(memory_stats().live == before.live);
}

BOOST_AUTO_TEST_CASE(a_freed_block_serves_the_next_tensor_of_its_size) {
  [[maybe_unused]] const void* first = nullptr;  // unread under AddressSanitizer
  {
    Tensor a({3, 1000}, DType::f64);
    first = a.raw_data();
  }
  const Tensor b({1000, 3}, DType::f64);  // the same byte count
#if defined(__SANITIZE_ADDRESS__)
  BOOST_TEST_MESSAGE("no block cache under AddressSanitizer; reuse not checked");
#else
  BOOST_TEST(b.raw_data() == first);
#endif
}

BOOST_AUTO_TEST_CASE(release_cached_memory_empties_the_cache) {
  { const Tensor t({kMB}, DType::f32); }
  release_cached_memory();
  BOOST_TEST(memory_stats().cached == 0u);
}

// Fills every tensor with its own index and checks that each still holds it: blocks built
// from moved pages must neither overlap nor lose a page.
void check_blocks_are_distinct(std::vector<Tensor>& ts) {
  for (size_t i = 0; i < ts.size(); ++i) ts[i].fill_(static_cast<double>(i));
  for (size_t i = 0; i < ts.size(); ++i) {
    const float* p = ts[i].data<float>();
    bool same = true;
    for (int64_t j = 0; j < ts[i].numel(); j += 1024) same = same && p[j] == static_cast<float>(i);
    same = same && p[ts[i].numel() - 1] == static_cast<float>(i);
    BOOST_TEST(same, "tensor " << i << " of " << ts[i].shape() << " was overwritten");
  }
}

std::vector<Tensor> blocks_of(std::size_t count, std::size_t megabytes) {
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < count; ++i) out.emplace_back(Shape{static_cast<int64_t>(megabytes * kMB / 4)}, DType::f32);
  return out;
}

BOOST_AUTO_TEST_CASE(a_miss_takes_the_pages_of_cached_blocks_of_other_sizes) {
  // 96 MB in 1 MB blocks, freed into the cache; then 96 MB in 3 MB blocks, then in 2 MB and
  // 5 MB blocks (split from and assembled of earlier ones). An exact-size cache would end up
  // holding every size's blocks; here each size is built from the pages the others left, so
  // the blocks held stay at the bytes live at once, and the blocks stay distinct.
  release_cached_memory();
  const std::size_t live0 = memory_stats().live;
  { std::vector<Tensor> ones_mb = blocks_of(96, 1); check_blocks_are_distinct(ones_mb); }
  [[maybe_unused]] const std::size_t held = memory_stats().live + memory_stats().cached;  // unread under ASan
  for (const auto& [count, mb] : std::vector<std::pair<std::size_t, std::size_t>>{{32, 3}, {48, 2}, {19, 5}, {96, 1}}) {
    BOOST_TEST_CONTEXT(count << " blocks of " << mb << " MB") {
      std::vector<Tensor> ts = blocks_of(count, mb);
      check_blocks_are_distinct(ts);
      const MemoryStats s = memory_stats();
      BOOST_TEST(s.live - live0 == count * mb * kMB);
#if !defined(__SANITIZE_ADDRESS__)
      BOOST_TEST(s.live + s.cached <= held);  // no new pages
#endif
    }
  }
  release_cached_memory();
  BOOST_TEST(memory_stats().cached == 0u);
}

BOOST_AUTO_TEST_CASE(a_block_is_made_of_mapped_pages_only_even_when_a_small_block_fits_the_rest) {
  // Cached: two 300 KB mapped blocks and a 200 KB malloc'ed one. A 400 KB block takes one
  // 300 KB block whole; the missing 100 KB fit the small block best, but only the other mapped
  // block may lend pages (malloc'ed memory cannot be moved, nor unmapped).
  release_cached_memory();
  const std::size_t kb = 1024;
  { const std::vector<Tensor> cached = {Tensor({static_cast<int64_t>(300 * kb / 4)}, DType::f32),
                                        Tensor({static_cast<int64_t>(300 * kb / 4)}, DType::f32),
                                        Tensor({static_cast<int64_t>(200 * kb / 4)}, DType::f32)}; }
  [[maybe_unused]] const std::size_t held = memory_stats().live + memory_stats().cached;  // unread under ASan
  std::vector<Tensor> ts;
  ts.emplace_back(Shape{static_cast<int64_t>(400 * kb / 4)}, DType::f32);
  ts.emplace_back(Shape{static_cast<int64_t>(200 * kb / 4)}, DType::f32);  // the small block, intact
  check_blocks_are_distinct(ts);
#if !defined(__SANITIZE_ADDRESS__)
  BOOST_TEST(memory_stats().live + memory_stats().cached <= held);  // no new pages
#endif
  ts.clear();
  release_cached_memory();
}

BOOST_AUTO_TEST_CASE(held_blocks_stay_within_the_live_high_water_mark_plus_slack) {
  // Small blocks (malloc'ed, not mapped) cannot lend pages: there the bound gives cached
  // blocks back instead. n is chosen so that 2n blocks are well above the mark, whatever
  // earlier tests allocated.
  release_cached_memory();
  const MemoryStats start = memory_stats();
  const std::size_t block = 64 << 10;  // below the mapping threshold
  const std::size_t n = std::max<std::size_t>(1024, 2 * start.high_water_live / block + 64);
  {
    std::vector<Tensor> small;
    for (std::size_t i = 0; i < n; ++i) small.emplace_back(Shape{static_cast<int64_t>(block / 4)}, DType::f32);
  }
  {
    std::vector<Tensor> other;
    for (std::size_t i = 0; i < n; ++i) other.emplace_back(Shape{static_cast<int64_t>(block / 4 + 16)}, DType::f32);
    const MemoryStats s = memory_stats();
    const std::size_t slack = std::max(4 * kMB, s.high_water_live / 8);
    BOOST_TEST(s.live + s.cached <= s.high_water_live + slack);
    BOOST_TEST(s.cached < n * block);  // some of the first blocks were given back
  }
  release_cached_memory();
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
