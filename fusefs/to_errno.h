// toErrno: the one place a Status becomes an errno (the FUSE edge).
#pragma once

#include "cache/status.h"

namespace epochfs::fusefs {

int toErrno(const cache::Status& s);

}  // namespace epochfs::fusefs
