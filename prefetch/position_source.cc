#include "prefetch/position_source.h"

#include <algorithm>

namespace epochfs::prefetch {

namespace {

class ReadPosition : public PositionSource {
 public:
  ReadPosition(PlanTracker& tracker, PositionHooks hooks)
      : PositionSource(tracker, std::move(hooks)) {}
  PositionMode mode() const override { return PositionMode::kReads; }
  bool mayPush(uint32_t) const override { return false; }
  void onOpen(uint64_t, uint32_t) override {}
};

class OpenPosition : public PositionSource {
 public:
  OpenPosition(PlanTracker& tracker, PositionHooks hooks)
      : PositionSource(tracker, std::move(hooks)) {}
  PositionMode mode() const override { return PositionMode::kOpens; }
  bool mayPush(uint32_t) const override { return true; }

  void onOpen(uint64_t fileId, uint32_t job) override {
    hooks_.observe(fileId, job);
    if (!tracker_.live()) return;
    const PlanTracker::Match m = tracker_.nearest(
        fileId,
        [](const PlanStream& s, uint32_t p) {
          return isWholeFile(s.plan().at(p)) && !s.isOpened(p);
        },
        job);
    if (m.stream != nullptr) {
      m.stream->touch(hooks_.now());
      // Pushed: the reads are served by the page cache and will not come. (An
      // empty file is never read either.) Otherwise its reads consume it, or
      // the push, if it lands before them.
      if (m.stream->markOpened(m.pos) || m.stream->plan().at(m.pos).length == 0) {
        m.stream->countHit();
        hooks_.consume(*m.stream, m.pos);
      }
    }
    if (tracker_.offPlan(m.planned, job)) hooks_.leftPlans(job);
  }

 protected:
  bool readsTrackFiles() const override { return false; }
  bool readMayConsume(const PlanStream& s, uint32_t pos) const override {
    return !isWholeFile(s.plan().at(pos)) || s.isOpened(pos);
  }
};

class SentinelPosition : public PositionSource {
 public:
  SentinelPosition(uint32_t every, PlanTracker& tracker, PositionHooks hooks)
      : PositionSource(tracker, std::move(hooks)), every_(std::max(1u, every)) {}
  PositionMode mode() const override { return PositionMode::kSentinels; }
  bool mayPush(uint32_t pos) const override { return pos % every_ != every_ - 1; }
  void onOpen(uint64_t, uint32_t) override {}

 protected:
  void afterReadConsumed(PlanStream& s, uint32_t pos) override {
    const uint64_t slack = 2 * uint64_t{every_};
    const uint64_t target = pos + 1 > slack ? pos + 1 - slack : 0;
    uint64_t from = 0;
    if (!s.claimSweep(target, &from)) return;
    // [from, target) is this sweep's alone: entries pushed there are read
    // from the page cache by now (or were skipped by the loader).
    for (uint64_t p = from; p < target; ++p) {
      if (s.isPushed(p)) hooks_.consume(s, static_cast<uint32_t>(p));
    }
  }

 private:
  const uint32_t every_;
};

}  // namespace

std::unique_ptr<PositionSource> PositionSource::make(PositionMode mode, uint32_t sentinelEvery,
                                                     PlanTracker& tracker, PositionHooks hooks) {
  switch (mode) {
    case PositionMode::kOpens:
      return std::make_unique<OpenPosition>(tracker, std::move(hooks));
    case PositionMode::kSentinels:
      return std::make_unique<SentinelPosition>(sentinelEvery, tracker, std::move(hooks));
    case PositionMode::kReads:
      break;
  }
  return std::make_unique<ReadPosition>(tracker, std::move(hooks));
}

void PositionSource::onRead(uint64_t fileId, uint64_t offset, uint64_t size, bool stalled,
                            uint32_t job) {
  if (readsTrackFiles() && offset == 0) hooks_.observe(fileId, job);
  if (!tracker_.live()) return;
  // The first not yet consumed entry of this file whose range the read ends in.
  const PlanTracker::Match m = tracker_.nearest(
      fileId,
      [&](const PlanStream& s, uint32_t p) {
        const PlanEntry& e = s.plan().at(p);
        if (offset + size <= e.offset || offset >= e.offset + std::max<uint64_t>(e.length, 1)) {
          return false;
        }
        return readMayConsume(s, p);
      },
      job);
  if (m.stream != nullptr) {
    const PlanEntry& e = m.stream->plan().at(m.pos);
    if (stalled) {
      m.stream->countStall();
    } else {
      m.stream->countHit();
    }
    m.stream->touch(hooks_.now());
    if (offset + size >= e.offset + e.length) {
      hooks_.consume(*m.stream, m.pos);
      afterReadConsumed(*m.stream, m.pos);
    }
  }
  // With opens tracked they count deviation: pushed files send no reads.
  if (readsTrackFiles() && tracker_.offPlan(m.planned, job)) hooks_.leftPlans(job);
}

void PositionSource::onPushed(PlanStream& s, uint32_t pos) {
  if (s.markPushed(pos)) hooks_.consume(s, pos);
}

}  // namespace epochfs::prefetch
