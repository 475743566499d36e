// Storage's block cache: the byte counts it reports, reuse of a freed block of the same size,
// and the bound on cached blocks (a miss gives back blocks of other sizes instead of letting
// the process hold every size's high-water mark at once).
#include <algorithm>
#include <vector>

#include "core/storage.h"
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
  const void* first = nullptr;
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

BOOST_AUTO_TEST_CASE(a_miss_gives_back_cached_blocks_of_other_sizes) {
  // n MB in 1 MB blocks, all freed into the cache; then n MB in 3 MB blocks. Without the bound
  // the process would hold 2n MB of blocks; with it, the 1 MB blocks are given back as the
  // 3 MB ones are allocated, so that the blocks held stay within the live high-water mark plus
  // its slack. n is chosen so that 2n MB is well above that, whatever earlier tests allocated.
  release_cached_memory();
  const MemoryStats start = memory_stats();
  std::size_t n = std::max<std::size_t>(96, start.high_water_live / kMB + 48);
  n += (3 - n % 3) % 3;  // whole 3 MB blocks
  {
    std::vector<Tensor> small;
    for (std::size_t i = 0; i < n; ++i) small.emplace_back(Shape{static_cast<int64_t>(kMB / 4)}, DType::f32);
  }
  {
    std::vector<Tensor> large;
    for (std::size_t i = 0; i < n / 3; ++i) large.emplace_back(Shape{static_cast<int64_t>(3 * kMB / 4)}, DType::f32);
    const MemoryStats s = memory_stats();
    BOOST_TEST(s.live - start.live == n * kMB);
    const std::size_t slack = std::max(4 * kMB, s.high_water_live / 8);
    BOOST_TEST(s.live + s.cached <= s.high_water_live + slack);
    BOOST_TEST(s.cached < n * kMB);  // some 1 MB blocks were given back
  }
  // Freed again, the 3 MB blocks are cached for the next tensors of their size.
#if !defined(__SANITIZE_ADDRESS__)
  BOOST_TEST(memory_stats().cached >= n * kMB);
#endif
  release_cached_memory();
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
