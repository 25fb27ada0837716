// Placeholder translation unit until the prefetch issue lands.
namespace epochfs::prefetch {

int prefetchModuleVersion() { return 0; }

}  // namespace epochfs::prefetch
