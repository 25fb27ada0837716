// FuseServer against a fake kernel side: its handlers are called directly,
// without a mount, a session or a FUSE thread, and reply into a
// RecordingReply (FuseReply that keeps the reply: its kind, errno, entry,
// attributes, bytes). The dataset is a small real tree in a temporary
// directory, snapshotted by DatasetNamespace and read through PosixSource and
// a ChunkCache of 4 KiB chunks, so a few KiB span several chunks. Every
// request must get exactly one reply. Immutable mode (the default) only:
// --revalidate starts an invalidation thread.
#include "fusefs/fuse_server.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cache/chunk_cache.h"
#include "cache/posix_source.h"
#include "cache/ram_tier.h"
#include "fusefs/admin_protocol.h"
#include "fusefs/dataset_namespace.h"
#include "fusefs/fuse_reply.h"
#include "tests/unit/cache/fake_source.h"
#include "tests/unit/fusefs/recording_reply.h"
#include "tests/unit/scoped_temp_dir.h"

namespace epochfs::fusefs {
namespace {

namespace fs = std::filesystem;
using testing::Dirent;
using testing::namesOf;
using testing::parseDirents;
using testing::RecordingReply;
using Kind = RecordingReply::Kind;

constexpr uint32_t kChunk = 4096;
constexpr double kYear = 365.0 * 86400;  // the immutable mode's entry/attr timeout

std::string patterned(size_t size, unsigned seed) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 131 + seed * 7 + i / 251) & 0xff);
  return s;
}

void writeFile(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << p;
}

// The tree: a/{big (3 chunks + 123 bytes), empty, small}, b/ (empty),
// link -> a/small, top.txt (777 bytes, mode 0640).
class FuseServerTest : public ::testing::Test {
 protected:
  static constexpr size_t kBigSize = 3 * kChunk + 123;

  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    root_ = dir_.path();
    fs::create_directories(root_ / "a");
    fs::create_directories(root_ / "b");
    big_ = patterned(kBigSize, 1);
    top_ = patterned(777, 2);
    writeFile(root_ / "a" / "big", big_);
    writeFile(root_ / "a" / "empty", "");
    writeFile(root_ / "a" / "small", "0123456789");
    writeFile(root_ / "top.txt", top_);
    ASSERT_EQ(::chmod((root_ / "top.txt").c_str(), 0640), 0);
    ASSERT_EQ(::symlink("a/small", (root_ / "link").c_str()), 0);

    const int fd = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    auto ns = DatasetNamespace::snapshot(fd, 1);
    ::close(fd);
    ASSERT_TRUE(ns.isOk()) << ns.status().toString();
    ns_ = std::make_unique<DatasetNamespace>(std::move(ns).value());
    auto source = cache::PosixSource::open(root_.string());
    ASSERT_TRUE(source.isOk()) << source.status().toString();
    source_ = std::move(source).value();
    cache_ = std::make_unique<cache::ChunkCache>(cacheOptions(), *source_, ram_, nullptr);
    FuseServer::Config config;
    config.adminSocketPath = "/run/epochfs/test.sock";
    server_ = std::make_unique<FuseServer>(config, *ns_, *cache_, *source_, nullptr);
  }

  static cache::ChunkCache::Options cacheOptions() {
    cache::ChunkCache::Options o;
    o.datasetId = 7;
    o.chunkSize = kChunk;
    return o;
  }

  // The inode of a relative path, found by the server's own lookups.
  fuse_ino_t ino(const std::string& relPath) {
    fuse_ino_t at = DatasetNamespace::kRootIno;
    for (const auto& part : fs::path(relPath)) {
      RecordingReply r;
      server_->onLookup(r, at, part.c_str());
      EXPECT_EQ(r.kind(), Kind::kEntry) << relPath;
      at = r.entry().ino;
    }
    return at;
  }

  struct stat sourceStat(const std::string& relPath) const {
    struct stat st {};
    EXPECT_EQ(::lstat((root_ / relPath).c_str(), &st), 0) << relPath;
    return st;
  }

  // Each helper sends one request and checks it got exactly one reply.
  RecordingReply lookup(fuse_ino_t parent, const char* name) {
    return once([&](RecordingReply& r) { server_->onLookup(r, parent, name); });
  }
  RecordingReply getattr(fuse_ino_t i) {
    return once([&](RecordingReply& r) { server_->onGetattr(r, i, nullptr); });
  }
  RecordingReply open(fuse_ino_t i, int flags) {
    fuse_file_info fi{};
    fi.flags = flags;
    return once([&](RecordingReply& r) { server_->onOpen(r, i, &fi); });
  }
  RecordingReply opendir(fuse_ino_t i) {
    fuse_file_info fi{};
    return once([&](RecordingReply& r) { server_->onOpendir(r, i, &fi); });
  }
  RecordingReply read(fuse_ino_t i, size_t size, off_t off) {
    return once([&](RecordingReply& r) { server_->onRead(r, i, size, off, nullptr); });
  }
  RecordingReply readdir(fuse_ino_t i, size_t size, off_t off, bool plus) {
    return once([&](RecordingReply& r) { server_->onReaddir(r, i, size, off, plus); });
  }
  template <typename F>
  static RecordingReply once(F request) {
    RecordingReply r;
    request(r);
    EXPECT_EQ(r.replies(), 1) << "a request must get exactly one reply";
    return r;
  }

  // The whole file `i` read in requests of `step` bytes (each reply checked
  // to be no longer than asked), as a sequential reader would.
  std::string readAll(fuse_ino_t i, size_t step) {
    std::string got;
    for (;;) {
      RecordingReply r = read(i, step, static_cast<off_t>(got.size()));
      EXPECT_TRUE(r.kind() == Kind::kIov || r.kind() == Kind::kBuf) << "errno " << r.errnum();
      EXPECT_LE(r.data().size(), step);
      if (r.data().empty() || r.kind() == Kind::kErr) return got;
      got += r.data();
    }
  }

  epochfs::testing::ScopedTempDir dir_{"epochfs-fuse-server"};
  fs::path root_;
  std::string big_, top_;
  std::unique_ptr<DatasetNamespace> ns_;
  std::unique_ptr<cache::PosixSource> source_;
  cache::RamTier ram_{1 << 22};
  std::unique_ptr<cache::ChunkCache> cache_;
  std::unique_ptr<FuseServer> server_;
};

// Pass: a lookup replies the entry of the name with the source's size and
// mode, our inode in st_ino, generation 1 and the immutable timeouts.
TEST_F(FuseServerTest, LookupRepliesTheEntryWithTheSourcesAttributes) {
  RecordingReply r = lookup(DatasetNamespace::kRootIno, "top.txt");
  ASSERT_EQ(r.kind(), Kind::kEntry);
  const fuse_entry_param& e = r.entry();
  EXPECT_GT(e.ino, DatasetNamespace::kRootIno);
  EXPECT_EQ(e.attr.st_ino, e.ino);
  EXPECT_EQ(e.generation, 1u);
  EXPECT_EQ(e.attr.st_size, 777);
  EXPECT_EQ(e.attr.st_mode, S_IFREG | 0640);
  EXPECT_EQ(e.attr.st_mtim.tv_sec, sourceStat("top.txt").st_mtim.tv_sec);
  EXPECT_EQ(e.entry_timeout, kYear);
  EXPECT_EQ(e.attr_timeout, kYear);

  RecordingReply a = lookup(DatasetNamespace::kRootIno, "a");
  ASSERT_EQ(a.kind(), Kind::kEntry);
  EXPECT_TRUE(S_ISDIR(a.entry().attr.st_mode));
  EXPECT_NE(a.entry().ino, e.ino);
  RecordingReply big = lookup(a.entry().ino, "big");
  ASSERT_EQ(big.kind(), Kind::kEntry);
  EXPECT_EQ(big.entry().attr.st_size, static_cast<off_t>(kBigSize));
  EXPECT_EQ(big.entry().attr.st_mode, sourceStat("a/big").st_mode);
  // The same name in another directory is another inode.
  EXPECT_EQ(lookup(DatasetNamespace::kRootIno, "big").errnum(), ENOENT);
}

// Pass: a missing name, a name under an inode that does not exist and a name
// under a regular file all get ENOENT (and no entry).
TEST_F(FuseServerTest, LookupOfAMissingNameOrInANonDirectoryIsENOENT) {
  for (const char* name : {"missing", "top", "top.txt2", ""}) {
    RecordingReply r = lookup(DatasetNamespace::kRootIno, name);
    EXPECT_EQ(r.kind(), Kind::kErr) << name;
    EXPECT_EQ(r.errnum(), ENOENT) << name;
  }
  EXPECT_EQ(lookup(ino("a"), "top.txt").errnum(), ENOENT);
  const fuse_ino_t beyond = ns_->nodeCount() + 1;
  EXPECT_EQ(lookup(beyond, "a").errnum(), ENOENT);
  EXPECT_EQ(lookup(0, "a").errnum(), ENOENT);
  // A regular file has no children.
  RecordingReply r = lookup(ino("top.txt"), "x");
  EXPECT_EQ(r.kind(), Kind::kErr);
  EXPECT_EQ(r.errnum(), ENOENT);
  EXPECT_EQ(lookup(ino("a/big"), "big").errnum(), ENOENT);
}

// Pass: getattr gives every kind of node the source's size, mode and mtime,
// our inode number, and the immutable timeout; an unknown inode is ENOENT.
TEST_F(FuseServerTest, GetattrReportsTheSourcesSizesAndModes) {
  for (const std::string path : {"a", "b", "a/big", "a/empty", "a/small", "top.txt", "link"}) {
    const fuse_ino_t i = ino(path);
    RecordingReply r = getattr(i);
    ASSERT_EQ(r.kind(), Kind::kAttr) << path;
    const struct stat src = sourceStat(path);
    EXPECT_EQ(r.attr().st_ino, i) << path;
    EXPECT_EQ(r.attr().st_mode, src.st_mode) << path;
    EXPECT_EQ(r.attr().st_mtim.tv_sec, src.st_mtim.tv_sec) << path;
    EXPECT_EQ(r.attr().st_mtim.tv_nsec, src.st_mtim.tv_nsec) << path;
    if (!S_ISDIR(src.st_mode)) {
      EXPECT_EQ(r.attr().st_size, src.st_size) << path;
    }
    EXPECT_EQ(r.timeout(), kYear) << path;
  }
  EXPECT_EQ(getattr(ino("a/big")).attr().st_size, static_cast<off_t>(kBigSize));
  EXPECT_EQ(getattr(ino("a/empty")).attr().st_size, 0);
  EXPECT_TRUE(S_ISLNK(getattr(ino("link")).attr().st_mode));
  EXPECT_EQ(getattr(ino("link")).attr().st_size, 7);  // strlen("a/small")
  RecordingReply root = getattr(DatasetNamespace::kRootIno);
  ASSERT_EQ(root.kind(), Kind::kAttr);
  EXPECT_TRUE(S_ISDIR(root.attr().st_mode));
  EXPECT_EQ(root.attr().st_ino, DatasetNamespace::kRootIno);
  EXPECT_EQ(getattr(ns_->nodeCount() + 1).errnum(), ENOENT);
  EXPECT_EQ(getattr(0).errnum(), ENOENT);
}

// Pass: a read-only open succeeds with keep_cache (no handle in the immutable
// mode); any write access or O_TRUNC is EROFS; an unknown inode is ENOENT.
// Today a directory inode opened O_RDONLY succeeds too: onOpen does not look
// at the type (the kernel sends OPENDIR, not OPEN, for directories).
TEST_F(FuseServerTest, OpenIsReadOnly) {
  const fuse_ino_t file = ino("top.txt");
  RecordingReply ok = open(file, O_RDONLY);
  ASSERT_EQ(ok.kind(), Kind::kOpen);
  EXPECT_EQ(ok.opened().keep_cache, 1u);
  EXPECT_EQ(ok.opened().fh, 0u);
  for (int flags : {O_WRONLY, O_RDWR, O_RDONLY | O_TRUNC, O_WRONLY | O_APPEND}) {
    RecordingReply r = open(file, flags);
    EXPECT_EQ(r.kind(), Kind::kErr) << flags;
    EXPECT_EQ(r.errnum(), EROFS) << flags;
  }
  EXPECT_EQ(open(ns_->nodeCount() + 1, O_RDONLY).errnum(), ENOENT);
  EXPECT_EQ(open(ino("a"), O_RDONLY).kind(), Kind::kOpen);
  EXPECT_EQ(open(ino("a"), O_RDWR).errnum(), EROFS);

  // A release answers 0.
  fuse_file_info fi{};
  RecordingReply rel = once([&](RecordingReply& r) { server_->onRelease(r, file, &fi); });
  EXPECT_EQ(rel.kind(), Kind::kErr);
  EXPECT_EQ(rel.errnum(), 0);
}

// Pass: opendir of a directory succeeds with cache_readdir and keep_cache;
// of a file or an unknown inode it is ENOTDIR.
TEST_F(FuseServerTest, OpendirOnlyOpensDirectories) {
  RecordingReply r = opendir(ino("a"));
  ASSERT_EQ(r.kind(), Kind::kOpen);
  EXPECT_EQ(r.opened().cache_readdir, 1u);
  EXPECT_EQ(r.opened().keep_cache, 1u);
  EXPECT_EQ(opendir(ino("top.txt")).errnum(), ENOTDIR);
  EXPECT_EQ(opendir(ino("link")).errnum(), ENOTDIR);
  EXPECT_EQ(opendir(ns_->nodeCount() + 1).errnum(), ENOTDIR);
}

// Pass: when the kernel can do without OPEN/OPENDIR, both answer ENOSYS
// (zero-message open, whatever the flags); init asks for readdirplus and
// no-opendir and raises max_readahead to 1 MiB.
TEST_F(FuseServerTest, ZeroMessageOpenAfterInit) {
  fuse_conn_info conn{};
  conn.capable = FUSE_CAP_NO_OPEN_SUPPORT | FUSE_CAP_NO_OPENDIR_SUPPORT | FUSE_CAP_READDIRPLUS |
                 FUSE_CAP_READDIRPLUS_AUTO;
  conn.want = FUSE_CAP_READDIRPLUS_AUTO;
  conn.max_readahead = 128 << 10;
  server_->onInit(&conn);
  EXPECT_TRUE(conn.want & FUSE_CAP_NO_OPENDIR_SUPPORT);
  EXPECT_TRUE(conn.want & FUSE_CAP_READDIRPLUS);
  EXPECT_FALSE(conn.want & FUSE_CAP_READDIRPLUS_AUTO);
  EXPECT_EQ(conn.max_readahead, 1u << 20);
  EXPECT_EQ(open(ino("top.txt"), O_RDONLY).errnum(), ENOSYS);
  EXPECT_EQ(open(ino("top.txt"), O_WRONLY).errnum(), ENOSYS);
  EXPECT_EQ(opendir(ino("a")).errnum(), ENOSYS);
  // Reads need no open: the zero-message open's reads carry no handle.
  EXPECT_EQ(read(ino("top.txt"), 4096, 0).data(), top_);
}

// Pass: a file of 3 chunks + 123 bytes comes back byte-exact in one request
// (one piece per chunk, no copy), in requests of 1000 bytes that straddle
// chunk boundaries, and in a request across one boundary; the cache counts
// the requests and bytes served.
TEST_F(FuseServerTest, ReadsAWholeFileAcrossChunksByteExact) {
  const fuse_ino_t big = ino("a/big");
  RecordingReply whole = read(big, 64 << 10, 0);
  ASSERT_EQ(whole.kind(), Kind::kIov) << "errno " << whole.errnum();
  EXPECT_EQ(whole.iovCount(), 4);
  EXPECT_EQ(whole.data().size(), kBigSize);
  EXPECT_TRUE(whole.data() == big_) << "bytes differ";

  EXPECT_TRUE(readAll(big, 1000) == big_);

  RecordingReply across = read(big, 20, kChunk - 10);
  ASSERT_EQ(across.kind(), Kind::kIov);
  EXPECT_EQ(across.iovCount(), 2);
  EXPECT_EQ(across.data(), big_.substr(kChunk - 10, 20));

  RecordingReply mid = read(big, kChunk, 2 * kChunk + 5);  // runs to 5 bytes into the last chunk
  EXPECT_EQ(mid.data(), big_.substr(2 * kChunk + 5, kChunk));

  EXPECT_EQ(read(ino("a/small"), 4096, 3).data(), "3456789");
  EXPECT_EQ(cache_->stats().readRequests.load(), 1u + 13 + 1 + 1 + 1);
  EXPECT_EQ(cache_->stats().readBytes.load(), 2 * kBigSize + 20 + kChunk + 7);
}

// Pass: a read that runs past the end is short, one at or past the end and a
// read of an empty file reply no bytes (an empty buf); an unknown inode is
// ENOENT.
TEST_F(FuseServerTest, AReadPastTheEndIsShortThenEmpty) {
  const fuse_ino_t big = ino("a/big");
  RecordingReply tail = read(big, 4096, kBigSize - 100);
  ASSERT_EQ(tail.kind(), Kind::kIov);
  EXPECT_EQ(tail.data(), big_.substr(kBigSize - 100));
  for (off_t off : {static_cast<off_t>(kBigSize), static_cast<off_t>(kBigSize + 5000)}) {
    RecordingReply r = read(big, 4096, off);
    EXPECT_EQ(r.kind(), Kind::kBuf) << off;
    EXPECT_TRUE(r.data().empty()) << off;
  }
  RecordingReply zero = read(big, 0, 0);
  EXPECT_EQ(zero.kind(), Kind::kBuf);
  EXPECT_TRUE(zero.data().empty());
  RecordingReply empty = read(ino("a/empty"), 4096, 0);
  EXPECT_EQ(empty.kind(), Kind::kBuf);
  EXPECT_TRUE(empty.data().empty());
  EXPECT_EQ(read(ns_->nodeCount() + 1, 4096, 0).errnum(), ENOENT);
}

// Pass: readdir lists ".", "..", then the children in name order with their
// inodes and types, each entry's offset resuming after it; small buffers
// give the same listing over several calls; the end replies empty; a file
// is ENOTDIR.
TEST_F(FuseServerTest, ReaddirListsEveryEntryWithResumableOffsets) {
  const fuse_ino_t root = DatasetNamespace::kRootIno;
  RecordingReply r = readdir(root, 64 << 10, 0, false);
  ASSERT_EQ(r.kind(), Kind::kBuf);
  const auto all = parseDirents(r.data(), false);
  ASSERT_EQ(namesOf(all), (std::vector<std::string>{".", "..", "a", "b", "link", "top.txt"}));
  for (size_t k = 0; k < all.size(); ++k) EXPECT_EQ(all[k].off, k + 1) << all[k].name;
  EXPECT_EQ(all[0].ino, root);
  EXPECT_EQ(all[1].ino, root);  // the root's ".." is itself
  EXPECT_EQ(all[2].ino, ino("a"));
  EXPECT_EQ(all[2].type, static_cast<uint32_t>(DT_DIR));
  EXPECT_EQ(all[4].ino, ino("link"));
  EXPECT_EQ(all[4].type, static_cast<uint32_t>(DT_LNK));
  EXPECT_EQ(all[5].ino, ino("top.txt"));
  EXPECT_EQ(all[5].type, static_cast<uint32_t>(DT_REG));

  // Resuming from an entry's offset gives what follows it.
  const std::vector<std::string> allNames = namesOf(all);
  for (size_t k = 0; k < all.size(); ++k) {
    RecordingReply rest = readdir(root, 64 << 10, static_cast<off_t>(all[k].off), false);
    ASSERT_EQ(rest.kind(), Kind::kBuf);
    EXPECT_EQ(namesOf(parseDirents(rest.data(), false)),
              std::vector<std::string>(allNames.begin() + k + 1, allNames.end()))
        << "resumed after " << all[k].name;
  }

  // A buffer of 70 bytes holds two short entries (32 bytes each) at most.
  std::vector<Dirent> paged;
  off_t off = 0;
  for (int calls = 0; calls < 10; ++calls) {
    RecordingReply page = readdir(root, 70, off, false);
    ASSERT_EQ(page.kind(), Kind::kBuf);
    EXPECT_LE(page.data().size(), 70u);
    const auto got = parseDirents(page.data(), false);
    if (got.empty()) break;
    EXPECT_LE(got.size(), 2u);
    paged.insert(paged.end(), got.begin(), got.end());
    off = static_cast<off_t>(got.back().off);
  }
  EXPECT_EQ(namesOf(paged), allNames);

  // A subdirectory: ".." is its parent; an empty one has only "." and "..".
  const auto a = parseDirents(readdir(ino("a"), 4096, 0, false).data(), false);
  ASSERT_EQ(namesOf(a), (std::vector<std::string>{".", "..", "big", "empty", "small"}));
  EXPECT_EQ(a[0].ino, ino("a"));
  EXPECT_EQ(a[1].ino, root);
  EXPECT_EQ(namesOf(parseDirents(readdir(ino("b"), 4096, 0, false).data(), false)),
            (std::vector<std::string>{".", ".."}));

  EXPECT_EQ(readdir(ino("top.txt"), 4096, 0, false).errnum(), ENOTDIR);
  EXPECT_EQ(readdir(ns_->nodeCount() + 1, 4096, 0, true).errnum(), ENOTDIR);
}

// Pass: readdirplus carries each child's entry (node id, size, mode, the
// immutable timeout) and no entry for "." and "..".
TEST_F(FuseServerTest, ReaddirplusCarriesEachChildsEntry) {
  RecordingReply r = readdir(ino("a"), 64 << 10, 0, true);
  ASSERT_EQ(r.kind(), Kind::kBuf);
  const auto all = parseDirents(r.data(), true);
  ASSERT_EQ(namesOf(all), (std::vector<std::string>{".", "..", "big", "empty", "small"}));
  EXPECT_EQ(all[0].entry.nodeid, 0u);
  EXPECT_EQ(all[1].entry.nodeid, 0u);
  const size_t sizes[] = {kBigSize, 0, 10};
  for (size_t k = 2; k < all.size(); ++k) {
    EXPECT_EQ(all[k].entry.nodeid, ino("a/" + all[k].name)) << all[k].name;
    EXPECT_EQ(all[k].entry.attr.ino, all[k].entry.nodeid) << all[k].name;
    EXPECT_EQ(all[k].entry.attr.size, sizes[k - 2]) << all[k].name;
    EXPECT_EQ(all[k].entry.attr.mode, sourceStat("a/" + all[k].name).st_mode) << all[k].name;
    EXPECT_EQ(all[k].entry.entry_valid, static_cast<uint64_t>(kYear)) << all[k].name;
    EXPECT_EQ(all[k].entry.generation, 1u) << all[k].name;
  }
}

// Pass: readlink replies the symlink's target; anything else is EINVAL.
TEST_F(FuseServerTest, ReadlinkRepliesTheTarget) {
  RecordingReply r = once([&](RecordingReply& rr) { server_->onReadlink(rr, ino("link")); });
  ASSERT_EQ(r.kind(), Kind::kReadlink);
  EXPECT_EQ(r.data(), "a/small");
  for (fuse_ino_t i : {ino("top.txt"), ino("a"), fuse_ino_t{ns_->nodeCount() + 1}}) {
    RecordingReply bad = once([&](RecordingReply& rr) { server_->onReadlink(rr, i); });
    EXPECT_EQ(bad.kind(), Kind::kErr) << i;
    EXPECT_EQ(bad.errnum(), EINVAL) << i;
  }
}

// Pass: statfs describes the snapshot: its bytes in 4 KiB blocks, its node
// count, read-only, 255-byte names.
TEST_F(FuseServerTest, StatfsDescribesTheSnapshot) {
  RecordingReply r =
      once([&](RecordingReply& rr) { server_->onStatfs(rr, DatasetNamespace::kRootIno); });
  ASSERT_EQ(r.kind(), Kind::kStatfs);
  const uint64_t fileBytes = kBigSize + 0 + 10 + 777;  // regular files only
  EXPECT_EQ(r.statfs().f_frsize, 4096u);
  EXPECT_EQ(r.statfs().f_bsize, 1u << 20);
  EXPECT_EQ(r.statfs().f_blocks, (fileBytes + 4095) / 4096);
  EXPECT_EQ(r.statfs().f_files, 8u);  // root, a, b, link, top.txt, big, empty, small
  EXPECT_EQ(r.statfs().f_namemax, 255u);
  EXPECT_TRUE(r.statfs().f_flag & ST_RDONLY);
  EXPECT_TRUE(r.statfs().f_flag & ST_NOSUID);
}

// Pass: the admin xattr exists on the root only: its size for size 0, ERANGE
// for a short buffer, the socket path otherwise; other names and inodes are
// ENODATA; listxattr lists it on the root and nothing elsewhere.
TEST_F(FuseServerTest, TheAdminXattrIsOnTheRootOnly) {
  const std::string sock = "/run/epochfs/test.sock";
  const fuse_ino_t root = DatasetNamespace::kRootIno;
  auto getxattr = [&](fuse_ino_t i, const char* name, size_t size) {
    return once([&](RecordingReply& r) { server_->onGetxattr(r, i, name, size); });
  };
  auto listxattr = [&](fuse_ino_t i, size_t size) {
    return once([&](RecordingReply& r) { server_->onListxattr(r, i, size); });
  };
  RecordingReply size = getxattr(root, admin::kAdminXattr, 0);
  ASSERT_EQ(size.kind(), Kind::kXattr);
  EXPECT_EQ(size.xattrSize(), sock.size());
  EXPECT_EQ(getxattr(root, admin::kAdminXattr, sock.size() - 1).errnum(), ERANGE);
  RecordingReply value = getxattr(root, admin::kAdminXattr, 256);
  ASSERT_EQ(value.kind(), Kind::kBuf);
  EXPECT_EQ(value.data(), sock);
  EXPECT_EQ(getxattr(root, admin::kAdminXattr, sock.size()).data(), sock);  // an exact fit
  EXPECT_EQ(getxattr(root, "user.other", 256).errnum(), ENODATA);
  EXPECT_EQ(getxattr(ino("a"), admin::kAdminXattr, 256).errnum(), ENODATA);

  const std::string list(admin::kAdminXattr, std::strlen(admin::kAdminXattr) + 1);
  EXPECT_EQ(listxattr(root, 0).xattrSize(), list.size());
  EXPECT_EQ(listxattr(root, 3).errnum(), ERANGE);
  EXPECT_EQ(listxattr(root, 256).data(), list);
  RecordingReply none = listxattr(ino("top.txt"), 0);
  EXPECT_EQ(none.kind(), Kind::kXattr);
  EXPECT_EQ(none.xattrSize(), 0u);
}

// Pass: in the immutable mode a file rewritten in the source after the
// snapshot keeps its snapshot attributes; chunks read before the change are
// still served (the old bytes, from the RAM tier), and a read that must go
// to the source fails with EIO (the source's kStale): never the new bytes.
TEST_F(FuseServerTest, AFileChangedInTheSourceServesItsCachedVersionOrEIO) {
  const fuse_ino_t top = ino("top.txt");
  const fuse_ino_t small = ino("a/small");
  ASSERT_EQ(read(top, 4096, 0).data(), top_);
  writeFile(root_ / "top.txt", std::string(900, 'Z'));
  writeFile(root_ / "a" / "small", "changed, and longer");

  EXPECT_TRUE(read(top, 4096, 0).data() == top_);
  RecordingReply r = read(small, 4096, 0);
  EXPECT_EQ(r.kind(), Kind::kErr);
  EXPECT_EQ(r.errnum(), EIO);
  EXPECT_TRUE(r.data().empty());
  EXPECT_EQ(getattr(small).attr().st_size, 10);
  EXPECT_EQ(getattr(top).attr().st_size, 777);
}

// Pass: a failing source read reaches the reader as the errno of its status
// (EIO for an I/O error, ETIMEDOUT for a timeout), with no data; the cache
// did ask the source each time (the error is not cached). Uses the cache
// tests' LatencySource (tests/unit/cache/fake_source.h) as the cache's source.
TEST_F(FuseServerTest, ASourceReadErrorIsTheReadsErrno) {
  cache::testing::LatencySource faulty;
  faulty.addFile("a/big", big_);
  cache::RamTier ram(1 << 22);
  cache::ChunkCache cache(cacheOptions(), faulty, ram, nullptr);
  FuseServer server(FuseServer::Config{}, *ns_, cache, faulty, nullptr);
  const fuse_ino_t big = ino("a/big");
  auto readBig = [&](off_t off) {
    return once([&](RecordingReply& r) { server.onRead(r, big, 64 << 10, off, nullptr); });
  };

  faulty.injectError("a/big", cache::Status::ioError("injected"));
  RecordingReply r = readBig(0);
  EXPECT_EQ(r.kind(), Kind::kErr);
  EXPECT_EQ(r.errnum(), EIO);
  EXPECT_TRUE(r.data().empty());
  const uint64_t reads = faulty.readsOf("a/big");
  EXPECT_GE(reads, 1u);

  faulty.injectError("a/big", cache::Status::timedOut("injected"));
  RecordingReply t = readBig(kChunk);
  EXPECT_EQ(t.kind(), Kind::kErr);
  EXPECT_EQ(t.errnum(), ETIMEDOUT);
  EXPECT_GT(faulty.readsOf("a/big"), reads);
  EXPECT_EQ(readBig(0).errnum(), ETIMEDOUT);  // retried, not the first error cached
}

}  // namespace
}  // namespace epochfs::fusefs
