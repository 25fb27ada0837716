// TorchOrderJobs: each job (mount) its own zero-change follower over one
// shared sample list — a follow() before the list is made waits for it,
// reads reach only their job's follower, whose plans carry that job, and
// end() stops it.
#include "prefetch/torch_order_jobs.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <future>
#include <map>

#include "cache/ram_tier.h"
#include "prefetch/torch_permutation.h"
#include "tests/unit/cache/fake_source.h"
#include "tests/unit/prefetch/prefetch_test_util.h"

namespace epochfs::prefetch {
namespace {

using namespace std::chrono_literals;

struct Rig {
  Rig() : source(0us), ram(16ull << 20), cache(testing::cacheOptions(42), source, ram, nullptr) {
    spdlog::set_level(spdlog::level::warn);
    prefetcher = std::make_unique<Prefetcher>(PrefetchOptions{}, cache);
    for (const PlanEntry& e : testing::addPlanFiles(source, 64, 1000)) samples.emplace_back(e);
  }
  // The file ids of `spec`'s rank 0 order in `epoch`.
  std::vector<uint64_t> order(const TorchOrderSpec& spec, int64_t epoch) const {
    std::vector<uint64_t> ids;
    for (int64_t i : distributedSamplerIndices(static_cast<int64_t>(samples.size()), spec.world, 0,
                                               spec.seed, epoch, true, false)) {
      ids.push_back(samples[static_cast<size_t>(i)]->identity.fileId);
    }
    return ids;
  }

  testing::LatencySource source;
  cache::RamTier ram;
  cache::ChunkCache cache;
  std::unique_ptr<Prefetcher> prefetcher;
  TorchSamples samples;
};

TEST(TorchOrderJobs, EachJobFollowsItsOwnOrder) {
  Rig rig;
  std::promise<void> listed;
  auto ready = listed.get_future().share();
  std::atomic<int> lists{0};
  TorchOrderJobs jobs(*rig.prefetcher, [&]() -> std::optional<TorchSamples> {
    ++lists;
    ready.wait();
    return rig.samples;
  });
  TorchOrderSpec a, b;
  a.seed = 11;
  b.seed = 5;
  jobs.follow(1, a);
  jobs.follow(2, b);
  EXPECT_EQ(jobs.epoch(1), -1);  // waits for the list
  EXPECT_FALSE(jobs.epoch(3).has_value());
  EXPECT_TRUE(jobs.any());
  listed.set_value();
  ASSERT_TRUE(testing::waitFor([&] { return jobs.listed(); }));
  // Job 1 reads epoch 3 of its order, job 2 epoch 7 of its own.
  for (uint64_t id : rig.order(a, 3)) jobs.onRead(id, 1);
  for (uint64_t id : rig.order(b, 7)) jobs.onRead(id, 2);
  // Each follower's plans carry its job.
  const std::map<uint32_t, int64_t> want{{1, 3}, {2, 7}};
  std::map<uint32_t, int64_t> epochOfJob;
  ASSERT_TRUE(testing::waitFor([&] {
    epochOfJob.clear();
    for (const auto& s : rig.prefetcher->stats()) epochOfJob[s.job] = s.epoch;
    return jobs.epoch(1) == 3 && jobs.epoch(2) == 7 && epochOfJob == want;
  })) << "plans of jobs: "
      << epochOfJob.size();
  EXPECT_EQ(lists, 1);  // one list for both
  jobs.end(1);
  EXPECT_FALSE(jobs.epoch(1).has_value());
  EXPECT_EQ(jobs.epoch(2), 7);
  jobs.onRead(rig.order(a, 3)[0], 1);  // a job that follows nothing: ignored
}

TEST(TorchOrderJobs, AListThatFailsFollowsNothing) {
  Rig rig;
  TorchOrderJobs jobs(*rig.prefetcher, [] { return std::optional<TorchSamples>(); });
  jobs.follow(1, TorchOrderSpec{});
  ASSERT_TRUE(testing::waitFor([&] { return !jobs.any(); }));
  jobs.follow(2, TorchOrderSpec{});
  EXPECT_FALSE(jobs.epoch(2).has_value());
}

}  // namespace
}  // namespace epochfs::prefetch
