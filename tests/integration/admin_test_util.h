// Helpers of the admin tests (admin_*_test.cc): running epochctl as any user
// (or on a pseudo-terminal), checking the shape of its --json output, and a
// Prometheus text-format checker.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/integration/mount_fixture.h"

namespace epochfs::itest {

struct Creds {
  uid_t uid = 65534;
  gid_t gid = 65534;
  std::vector<gid_t> groups;  // supplementary
};

std::string ctlBinary();  // $EPOCHFS_BIN_DIR/epochctl

// Runs `epochctl args...` to completion (as `creds` when given), stdout and
// stderr captured, stdin from /dev/null or `input`.
ProcResult runCtl(const std::vector<std::string>& args, double timeoutSec = 60,
                  const std::optional<Creds>& creds = std::nullopt, const std::string& input = "");
// The same on a pseudo-terminal (stdout and stderr both to it); out holds all.
ProcResult runCtlOnPty(const std::vector<std::string>& args, double timeoutSec = 60);

// stdout of a --json run, parsed (a discarded value when it is not JSON).
nlohmann::json jsonOf(const ProcResult& r);

// Checks `value` against `shape`: a type name ("string", "uint", "int",
// "number", "bool", "null", "object", "array", "any", alternatives joined by
// '|'), an object of shapes (every key required, extra keys allowed) or an
// array of one shape (every element). Returns the mismatches, "" if none.
std::string shapeErrors(const nlohmann::json& value, const nlohmann::json& shape,
                        const std::string& where = "$");

// Checks Prometheus text exposition: HELP/TYPE once per family, each family's
// samples contiguous after its TYPE, well-formed labels and values. Returns
// the problems, "" if none.
std::string expositionErrors(const std::string& text);

// A connected Unix socket to the mount's admin socket, or -1.
int connectAdmin(const std::string& mnt);

// True if stderr is exactly one line "epochctl: error: ..." containing `word`
// (case-insensitive).
::testing::AssertionResult oneErrorLine(const ProcResult& r, const std::string& word);

}  // namespace epochfs::itest
