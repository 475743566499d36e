#include "attograd/train/io/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace ag {

namespace {

std::string system_reason(int err) { return std::strerror(err); }

std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISREG(mode)) return "a regular file";
  return "not a regular file";
}

// "<base>.tmp-<pid>-<n>" -> pid, or 0 when `name` is not a temporary of `base`.
pid_t temporary_owner(const std::string& name, const std::string& base) {
  const std::string prefix = base + ".tmp-";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return 0;
  const std::string rest = name.substr(prefix.size());
  const size_t dash = rest.find('-');
  if (dash == 0 || dash == std::string::npos || dash + 1 == rest.size()) return 0;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (i != dash && (rest[i] < '0' || rest[i] > '9')) return 0;
  }
  if (dash > 9) return 0;
  return static_cast<pid_t>(std::stol(rest.substr(0, dash)));
}

}  // namespace

int remove_stale_temporaries(const std::string& path) {
  const std::string dir = directory_of(path);
  const size_t slash = path.find_last_of('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  int removed = 0;
  while (const dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    const pid_t owner = temporary_owner(name, base);
    // Only a process that no longer exists cannot finish its save; a live one's file stays.
    if (owner <= 0 || owner == ::getpid() || ::kill(owner, 0) == 0 || errno != ESRCH) continue;
    if (::unlink((dir + "/" + name).c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  if (path_.empty()) throw std::runtime_error("AtomicFile: empty file name");
  remove_stale_temporaries(path_);  // left by saves that were killed
  // pid + a process-wide counter keep concurrent writers (threads or processes) apart; O_EXCL
  // makes a leftover temporary from a crashed run a retry, never a shared file.
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_path_ = path_ + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) return;
    if (errno != EEXIST) break;
  }
  const int err = errno;
  throw std::runtime_error("cannot write '" + path_ + "': creating the temporary file '" + temp_path_ +
                           "' failed: " + system_reason(err));
}

AtomicFile::~AtomicFile() {
  if (!committed_) discard();
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
}

void AtomicFile::write(const void* data, size_t bytes) {
  if (fd_ < 0) throw std::logic_error("AtomicFile::write: '" + path_ + "' was already committed or discarded");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      discard();
      throw std::runtime_error("cannot write '" + path_ + "': writing the temporary file failed: " +
                               system_reason(err) + " (the previous file, if any, is unchanged)");
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw std::logic_error("AtomicFile::commit: '" + path_ + "' was already committed or discarded");
  const auto fail = [&](const char* step, int err) {
    discard();
    throw std::runtime_error("cannot write '" + path_ + "': " + step + " failed: " + system_reason(err) +
                             " (the previous file, if any, is unchanged)");
  };
  if (::fsync(fd_) != 0) fail("fsync of the temporary file", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("closing the temporary file", errno);
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) fail("renaming the temporary file into place", errno);
  committed_ = true;
  // The rename lives in the directory: sync it too so the new name survives a power cut. Some
  // file systems refuse fsync on directories; the data itself is already safe then.
  const int dir = ::open(directory_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

void write_file_atomically(const std::string& path, std::string_view contents) {
  AtomicFile out(path);
  out.write(contents);
  out.commit();
}

std::string read_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. The kind
  // of file is checked on the open descriptor, so it cannot change between check and read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    throw std::runtime_error("cannot read '" + path + "': " + system_reason(err));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    throw std::runtime_error("cannot read '" + path + "': " + system_reason(err));
  }
  if (!S_ISREG(st.st_mode)) {
    throw std::runtime_error("cannot read '" + path + "': it is " + file_kind(st.st_mode) + ", not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  std::string bytes;
  try {
    bytes.resize(size);
  } catch (const std::bad_alloc&) {
    throw std::runtime_error("cannot read '" + path + "': its " + std::to_string(size) + " bytes do not fit in memory");
  }
  // Exactly the size known before reading: a file that grows meanwhile is read as it was.
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, bytes.data() + done, size - done);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      throw std::runtime_error("cannot read '" + path + "': " + system_reason(err));
    }
    done += static_cast<size_t>(n);
  }
  if (done < size) {
    throw std::runtime_error("cannot read '" + path + "': it shrank from " + std::to_string(size) + " to " +
                             std::to_string(done) + " bytes while being read");
  }
  return bytes;
}

}  // namespace ag
