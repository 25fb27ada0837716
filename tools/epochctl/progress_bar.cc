#include "tools/epochctl/progress_bar.h"

#include <algorithm>

#include "tools/epochctl/formatting.h"

namespace epochfs::ctl {

ProgressBar::ProgressBar(std::FILE* out, bool tty, double lineSeconds)
    : out_(out), tty_(tty), lineSeconds_(lineSeconds) {}

std::string ProgressBar::clock(double seconds) {
  const auto s = static_cast<long long>(std::max(0.0, seconds) + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%llds", s);
  }
  return buf;
}

std::string ProgressBar::text(uint64_t filesDone, uint64_t filesTotal, uint64_t bytesDone,
                              uint64_t bytesTotal, double seconds, bool bar) const {
  const double frac =
      bytesTotal > 0   ? static_cast<double>(bytesDone) / static_cast<double>(bytesTotal)
      : filesTotal > 0 ? static_cast<double>(filesDone) / static_cast<double>(filesTotal)
                       : 1.0;
  const double rate = seconds > 0 ? static_cast<double>(bytesDone) / seconds : 0;
  const std::string eta = rate > 0 && bytesTotal > bytesDone
                              ? clock(static_cast<double>(bytesTotal - bytesDone) / rate)
                              : (frac >= 1.0 ? "done" : "?");
  char buf[256];
  std::string prefix;
  if (bar) {
    constexpr int kWidth = 24;
    const int filled = std::clamp(static_cast<int>(frac * kWidth), 0, kWidth);
    prefix.push_back('[');
    prefix.append(static_cast<size_t>(filled), '#');
    prefix.append(static_cast<size_t>(kWidth - filled), '.');
    prefix.append("] ");
  } else {
    prefix = "warm: ";
  }
  std::snprintf(buf, sizeof buf, "%3.0f%%  %llu/%llu files  %s/%s  %s/s  ETA %s", 100.0 * frac,
                static_cast<unsigned long long>(filesDone),
                static_cast<unsigned long long>(filesTotal), humanBytes(bytesDone).c_str(),
                humanBytes(bytesTotal).c_str(), humanBytes(static_cast<uint64_t>(rate)).c_str(),
                eta.c_str());
  prefix.append(buf);
  return prefix;
}

void ProgressBar::update(uint64_t filesDone, uint64_t filesTotal, uint64_t bytesDone,
                         uint64_t bytesTotal, double seconds) {
  if (tty_) {
    std::fprintf(out_, "\r%s\033[K",
                 text(filesDone, filesTotal, bytesDone, bytesTotal, seconds, true).c_str());
    std::fflush(out_);
  } else if (seconds - lastPrinted_ >= lineSeconds_) {
    lastPrinted_ = seconds;
    std::fprintf(out_, "%s\n",
                 text(filesDone, filesTotal, bytesDone, bytesTotal, seconds, false).c_str());
    std::fflush(out_);
  }
}

void ProgressBar::finish(uint64_t filesDone, uint64_t filesTotal, uint64_t bytesDone,
                         uint64_t bytesTotal, double seconds) {
  if (tty_) {
    std::fprintf(out_, "\r%s\033[K\n",
                 text(filesDone, filesTotal, bytesDone, bytesTotal, seconds, true).c_str());
  } else {
    std::fprintf(out_, "%s\n",
                 text(filesDone, filesTotal, bytesDone, bytesTotal, seconds, false).c_str());
  }
  std::fflush(out_);
}

}  // namespace epochfs::ctl
