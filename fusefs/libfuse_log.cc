#include "fusefs/libfuse_log.h"

#include <fuse_log.h>
#include <spdlog/spdlog.h>

#include <cstdarg>
#include <cstdio>
#include <string>

namespace epochfs::fusefs {

namespace {

void toSpdlog(enum fuse_log_level level, const char* fmt, va_list ap) {
  char buf[512];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  std::string msg(buf);
  while (!msg.empty() && msg.back() == '\n') msg.pop_back();
  if (level <= FUSE_LOG_ERR) {
    spdlog::error("libfuse: {}", msg);
  } else {
    spdlog::debug("libfuse: {}", msg);
  }
}

}  // namespace

void routeLibfuseLog() { fuse_set_log_func(toSpdlog); }

}  // namespace epochfs::fusefs
