// splice-floor: the least a FUSE daemon can do to serve a read-only tree, to
// measure the floor under epochfs's cold path ([kernel-pages], step 0).
//
//   splice-floor SOURCE MOUNTPOINT [--reply splice|copy] [--threads N]
//                [--order FILE --readahead-files K] [--direct-io]
//
// Every request goes straight to SOURCE: no cache, no checksum, no stats.
//   --reply splice  reads are answered by fuse_reply_data over the source fd
//                   (FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK) with SPLICE_WRITE and
//                   SPLICE_MOVE negotiated: the bytes go page cache -> pipe ->
//                   /dev/fuse and never through this process's memory.
//   --reply copy    pread into one buffer per thread, reused, then
//                   fuse_reply_buf: the buffered path without fresh memory.
//   --order FILE    one path per line relative to SOURCE, the epoch's order;
//                   a thread keeps POSIX_FADV_WILLNEED issued for the next K
//                   files past the furthest one opened (readahead along the
//                   order: the device fills the source's page cache ahead).
//   --direct-io     every open with FOPEN_DIRECT_IO: the reply goes into the
//                   reader's buffer, not into FUSE page-cache pages.
// It daemonizes once mounted (as FUSE filesystems do) and exits on unmount.
// A benchmark instrument (tools/bench/README.md), never installed.
#define FUSE_USE_VERSION 312
#include <dirent.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

constexpr double kTimeoutSeconds = 3600;  // the tree never changes under a benchmark

struct Options {
  std::string source;
  std::string mountpoint;
  bool splice = true;
  unsigned threads = 16;
  std::string order_file;
  size_t readahead_files = 0;
  bool direct_io = false;
};

// Inode numbers are the source's; the table maps them to paths (never forgotten).
class InodeTable {
 public:
  void setRoot(const std::string& root) { add(FUSE_ROOT_ID, root); }
  std::string path(fuse_ino_t ino) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = paths_.find(ino);
    return it == paths_.end() ? std::string() : it->second;
  }
  void add(fuse_ino_t ino, const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    paths_.emplace(ino, path);
  }

 private:
  std::mutex mu_;
  std::unordered_map<fuse_ino_t, std::string> paths_;
};

// Keeps WILLNEED issued for the K files of the order past the furthest opened.
class OrderReadahead {
 public:
  OrderReadahead(const std::string& source, const std::string& order_file, size_t depth)
      : depth_(depth) {
    std::ifstream in(order_file);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      index_.emplace(source + "/" + line, paths_.size());
      paths_.push_back(source + "/" + line);
    }
  }
  void start() {
    thread_ = std::thread([this] { run(); });
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void opened(const std::string& path) {
    auto it = index_.find(path);
    if (it == index_.end()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (it->second + 1 <= furthest_) return;
      furthest_ = it->second + 1;
    }
    cv_.notify_one();
  }
  size_t files() const { return paths_.size(); }

 private:
  void run() {
    size_t next = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || next < furthest_ + depth_; });
        if (stopping_) return;
        next = std::max(next, furthest_);
      }
      if (next >= paths_.size()) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_; });
        return;
      }
      int fd = ::open(paths_[next].c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
        ::close(fd);
      }
      ++next;
    }
  }

  size_t depth_;
  std::vector<std::string> paths_;
  std::unordered_map<std::string, size_t> index_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t furthest_ = 0;  // one past the furthest order index opened
  bool stopping_ = false;
  std::thread thread_;
};

struct Daemon {
  Options options;
  InodeTable inodes;
  OrderReadahead* readahead = nullptr;
};

Daemon* daemonOf(fuse_req_t req) { return static_cast<Daemon*>(fuse_req_userdata(req)); }

void onInit(void* userdata, fuse_conn_info* conn) {
  auto* d = static_cast<Daemon*>(userdata);
  if (d->options.splice) {
    if (conn->capable & FUSE_CAP_SPLICE_WRITE) conn->want |= FUSE_CAP_SPLICE_WRITE;
    if (conn->capable & FUSE_CAP_SPLICE_MOVE) conn->want |= FUSE_CAP_SPLICE_MOVE;
  }
  conn->want &= ~FUSE_CAP_READDIRPLUS;
  conn->max_readahead = std::max<unsigned>(conn->max_readahead, 128 << 10);
}

void onLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Daemon* d = daemonOf(req);
  std::string dir = d->inodes.path(parent);
  if (dir.empty()) return (void)fuse_reply_err(req, ESTALE);
  std::string path = dir + "/" + name;
  fuse_entry_param e{};
  if (::lstat(path.c_str(), &e.attr) != 0) return (void)fuse_reply_err(req, errno);
  e.ino = e.attr.st_ino;
  e.attr_timeout = kTimeoutSeconds;
  e.entry_timeout = kTimeoutSeconds;
  d->inodes.add(e.ino, path);
  fuse_reply_entry(req, &e);
}

void onGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  std::string path = daemonOf(req)->inodes.path(ino);
  struct stat st {};
  if (path.empty()) return (void)fuse_reply_err(req, ESTALE);
  if (::lstat(path.c_str(), &st) != 0) return (void)fuse_reply_err(req, errno);
  if (ino == FUSE_ROOT_ID) st.st_ino = FUSE_ROOT_ID;
  fuse_reply_attr(req, &st, kTimeoutSeconds);
}

void onOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  std::string path = daemonOf(req)->inodes.path(ino);
  DIR* dir = path.empty() ? nullptr : ::opendir(path.c_str());
  if (dir == nullptr) return (void)fuse_reply_err(req, path.empty() ? ESTALE : errno);
  fi->fh = reinterpret_cast<uint64_t>(dir);
  fuse_reply_open(req, fi);
}

void onReaddir(fuse_req_t req, fuse_ino_t, size_t size, off_t offset, fuse_file_info* fi) {
  DIR* dir = reinterpret_cast<DIR*>(fi->fh);
  std::vector<char> buf(size);
  size_t used = 0;
  ::seekdir(dir, offset);
  for (;;) {
    long here = ::telldir(dir);
    errno = 0;
    dirent* ent = ::readdir(dir);
    if (ent == nullptr) break;
    struct stat st {};
    st.st_ino = ent->d_ino;
    st.st_mode = static_cast<mode_t>(ent->d_type) << 12;
    long next = ::telldir(dir);
    size_t need = fuse_add_direntry(req, buf.data() + used, size - used, ent->d_name, &st, next);
    if (need > size - used) {
      ::seekdir(dir, here);
      break;
    }
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void onReleasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  ::closedir(reinterpret_cast<DIR*>(fi->fh));
  fuse_reply_err(req, 0);
}

void onOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Daemon* d = daemonOf(req);
  std::string path = d->inodes.path(ino);
  if (path.empty()) return (void)fuse_reply_err(req, ESTALE);
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return (void)fuse_reply_err(req, EROFS);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return (void)fuse_reply_err(req, errno);
  if (d->readahead != nullptr) d->readahead->opened(path);
  fi->fh = static_cast<uint64_t>(fd);
  fi->keep_cache = 0;
  fi->direct_io = d->options.direct_io ? 1 : 0;
  fuse_reply_open(req, fi);
}

void onRead(fuse_req_t req, fuse_ino_t, size_t size, off_t offset, fuse_file_info* fi) {
  const int fd = static_cast<int>(fi->fh);
  if (daemonOf(req)->options.splice) {
    fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
    buf.buf[0].flags = static_cast<fuse_buf_flags>(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    buf.buf[0].fd = fd;
    buf.buf[0].pos = offset;
    fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
    return;
  }
  thread_local std::vector<char> buffer;  // reused: no fresh memory per read
  if (buffer.size() < size) buffer.resize(size);
  ssize_t n = ::pread(fd, buffer.data(), size, offset);
  if (n < 0) return (void)fuse_reply_err(req, errno);
  fuse_reply_buf(req, buffer.data(), static_cast<size_t>(n));
}

void onRelease(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  const int fd = static_cast<int>(fi->fh);
  ::close(fd);
  fuse_reply_err(req, 0);
}

int usage() {
  std::fprintf(stderr,
               "usage: splice-floor SOURCE MOUNTPOINT [--reply splice|copy] [--threads N]\n"
               "                    [--order FILE --readahead-files K] [--direct-io]\n");
  return 2;
}

bool parse(int argc, char** argv, Options* o) {
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--reply") {
      if (!value(&v) || (v != "splice" && v != "copy")) return false;
      o->splice = v == "splice";
    } else if (a == "--threads") {
      if (!value(&v)) return false;
      o->threads = static_cast<unsigned>(std::stoul(v));
    } else if (a == "--order") {
      if (!value(&o->order_file)) return false;
    } else if (a == "--readahead-files") {
      if (!value(&v)) return false;
      o->readahead_files = std::stoul(v);
    } else if (a == "--direct-io") {
      o->direct_io = true;
    } else if (a.rfind("--", 0) == 0) {
      return false;
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2 || o->threads == 0) return false;
  o->source = positional[0];
  o->mountpoint = positional[1];
  return o->order_file.empty() == (o->readahead_files == 0);
}

}  // namespace

int main(int argc, char** argv) {
  Daemon d;
  if (!parse(argc, argv, &d.options)) return usage();
  char resolved[PATH_MAX];
  if (::realpath(d.options.source.c_str(), resolved) == nullptr) {
    std::fprintf(stderr, "splice-floor: %s: %s\n", d.options.source.c_str(), std::strerror(errno));
    return 1;
  }
  d.inodes.setRoot(resolved);
  d.options.source = resolved;

  fuse_lowlevel_ops ops{};
  ops.init = onInit;
  ops.lookup = onLookup;
  ops.getattr = onGetattr;
  ops.opendir = onOpendir;
  ops.readdir = onReaddir;
  ops.releasedir = onReleasedir;
  ops.open = onOpen;
  ops.read = onRead;
  ops.release = onRelease;

  char arg0[] = "splice-floor";
  char opt[] = "-o";
  char opts[] = "ro,fsname=splice-floor,default_permissions";
  char* fuse_argv[] = {arg0, opt, opts};
  fuse_args args = FUSE_ARGS_INIT(3, fuse_argv);
  fuse_session* se = fuse_session_new(&args, &ops, sizeof(ops), &d);
  if (se == nullptr) return 1;
  if (fuse_session_mount(se, d.options.mountpoint.c_str()) != 0) {
    fuse_session_destroy(se);
    return 1;
  }
  if (fuse_daemonize(0) != 0) return 1;  // returns to the caller once mounted
  std::unique_ptr<OrderReadahead> readahead;
  if (!d.options.order_file.empty()) {
    readahead = std::make_unique<OrderReadahead>(d.options.source, d.options.order_file,
                                                 d.options.readahead_files);
    readahead->start();
    d.readahead = readahead.get();
  }
  fuse_set_signal_handlers(se);
  fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_clone_fd(cfg, 1);
  fuse_loop_cfg_set_max_threads(cfg, d.options.threads);
  fuse_loop_cfg_set_idle_threads(cfg, d.options.threads);
  int rc = fuse_session_loop_mt(se, cfg);
  fuse_loop_cfg_destroy(cfg);
  if (readahead) readahead->stop();
  fuse_remove_signal_handlers(se);
  fuse_session_unmount(se);
  fuse_session_destroy(se);
  return rc == 0 ? 0 : 1;
}
