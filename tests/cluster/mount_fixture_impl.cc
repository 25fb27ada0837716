// The cluster tests reuse the integration tests' process and mount helpers
// (tests/integration/mount_fixture.h); this compiles them into cluster_tests.
#include "tests/integration/mount_fixture.cc"  // NOLINT(bugprone-suspicious-include)
