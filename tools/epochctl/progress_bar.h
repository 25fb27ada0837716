// ProgressBar: progress of a long command (warm). On a terminal a bar redrawn
// in place (files, bytes, rate, ETA); otherwise a plain line every second.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace epochfs::ctl {

class ProgressBar {
 public:
  // `tty`: redraw in place; else plain lines at most once per `lineSeconds`.
  ProgressBar(std::FILE* out, bool tty, double lineSeconds = 1.0);

  void update(uint64_t filesDone, uint64_t filesTotal, uint64_t bytesDone, uint64_t bytesTotal,
              double seconds);
  // The final state (always printed) and, on a terminal, the newline.
  void finish(uint64_t filesDone, uint64_t filesTotal, uint64_t bytesDone, uint64_t bytesTotal,
              double seconds);

  // "1:02:03" / "2:03" / "5s".
  static std::string clock(double seconds);

 private:
  std::string text(uint64_t filesDone, uint64_t filesTotal, uint64_t bytesDone, uint64_t bytesTotal,
                   double seconds, bool bar) const;

  std::FILE* out_;
  bool tty_;
  double lineSeconds_;
  double lastPrinted_ = -1e9;
};

}  // namespace epochfs::ctl
