// Human-readable renderings of admin replies.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace epochfs::ctl {

std::string humanBytes(uint64_t bytes);
std::string formatStatus(const nlohmann::json& status);
std::string formatStats(const nlohmann::json& stats);
std::string formatRefresh(const nlohmann::json& refresh);

}  // namespace epochfs::ctl
