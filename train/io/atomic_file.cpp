#include "attograd/train/io/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "attograd/train/io/crc32c.h"

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

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The tag of temporary_path(): a CRC-32C of what the name says, behind a prefix of our own.
std::string temporary_tag(const std::string& base, long pid, unsigned n) {
  const std::string said = "attograd temporary " + base + " " + std::to_string(pid) + " " + std::to_string(n);
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(crc32c(said.data(), said.size())));
  return hex;
}

std::string temporary_name(const std::string& base, long pid, unsigned n) {
  return base + ".tmp-" + std::to_string(pid) + "-" + std::to_string(n) + "-" + temporary_tag(base, pid, n);
}

// The pid in `name` when it is one of our temporaries of `base` (the name we would give it,
// tag and all), else 0.
pid_t temporary_owner(const std::string& name, const std::string& base) {
  const std::string prefix = base + ".tmp-";
  if (name.compare(0, prefix.size(), prefix) != 0) return 0;
  const char* end = name.data() + name.size();
  long pid = 0;
  unsigned n = 0;
  const auto [after_pid, pid_error] = std::from_chars(name.data() + prefix.size(), end, pid);
  if (pid_error != std::errc() || after_pid == end || *after_pid != '-' || pid <= 0 || pid > INT_MAX) return 0;
  if (std::from_chars(after_pid + 1, end, n).ec != std::errc()) return 0;
  return name == temporary_name(base, pid, n) ? static_cast<pid_t>(pid) : 0;
}

}  // namespace

std::string temporary_path(const std::string& path, long pid, unsigned n) {
  const size_t slash = path.find_last_of('/');
  return path.substr(0, slash == std::string::npos ? 0 : slash + 1) + temporary_name(base_name(path), pid, n);
}

int remove_stale_temporaries(const std::string& path) {
  const std::string dir = directory_of(path);
  const std::string base = base_name(path);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  int removed = 0;
  while (const dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    const pid_t owner = temporary_owner(name, base);
    // Only a process that no longer exists cannot finish its save; a live one's file stays.
    if (owner <= 0 || owner == ::getpid() || ::kill(owner, 0) == 0 || errno != ESRCH) continue;
    // What a save of ours leaves is a regular file of this user; a link or another user's file is not.
    const std::string file = dir + "/" + name;
    struct stat st {};
    if (::lstat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) continue;
    if (::unlink(file.c_str()) == 0) ++removed;
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
    temp_path_ = temporary_path(path_, ::getpid(), counter++);
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

int write_all(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return 0;
}

void AtomicFile::write(const void* data, size_t bytes) {
  if (fd_ < 0) throw std::logic_error("AtomicFile::write: '" + path_ + "' was already committed or discarded");
  if (const int err = write_all(fd_, data, bytes); err != 0) {
    discard();
    throw std::runtime_error("cannot write '" + path_ + "': writing the temporary file failed: " +
                             system_reason(err) + " (the previous file, if any, is unchanged)");
  }
}

void AtomicFile::write_at(uint64_t offset, const void* data, size_t bytes) {
  if (fd_ < 0) throw std::logic_error("AtomicFile::write_at: '" + path_ + "' was already committed or discarded");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      discard();
      throw std::runtime_error("cannot write '" + path_ + "': writing the temporary file at offset " +
                               std::to_string(offset) + " failed: " + system_reason(err) +
                               " (the previous file, if any, is unchanged)");
    }
    p += n;
    bytes -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
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

namespace {

std::string read_unsized(int fd, const std::string& path) {
  constexpr size_t kBound = size_t{1} << 30;
  std::string bytes;
  char block[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, block, sizeof block);
    if (n == 0) return bytes;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      const int err = errno;
      throw std::runtime_error("cannot read '" + path + "': " + system_reason(err));
    }
    if (bytes.size() + static_cast<size_t>(n) > kBound) {
      throw std::runtime_error("cannot read '" + path + "': it says it is empty but holds more than " +
                               std::to_string(kBound) + " bytes");
    }
    bytes.append(block, static_cast<size_t>(n));
  }
}

}  // namespace

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
  // A file that says it is empty may still hold text (/proc's and /sys's say 0): read those to
  // their end, up to a bound, rather than call them empty.
  if (st.st_size == 0) return read_unsized(fd, path);
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

FileReader::FileReader(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // O_NONBLOCK: see read_file
  if (fd_ < 0) {
    const int err = errno;
    throw std::runtime_error("cannot read '" + path_ + "': " + system_reason(err));
  }
  struct stat st {};
  const bool stat_ok = ::fstat(fd_, &st) == 0;
  const int err = errno;
  if (!stat_ok || !S_ISREG(st.st_mode)) {
    const std::string why = stat_ok ? std::string("it is ") + file_kind(st.st_mode) + ", not a regular file" : system_reason(err);
    ::close(fd_);
    throw std::runtime_error("cannot read '" + path_ + "': " + why);
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

FileReader::~FileReader() { ::close(fd_); }

void FileReader::read(uint64_t offset, void* data, size_t bytes) const {
  if (offset > size_ || bytes > size_ - offset) {
    throw std::runtime_error("'" + path_ + "' is truncated: bytes [" + std::to_string(offset) + ", " +
                             std::to_string(offset + bytes) + ") were wanted from a file of " + std::to_string(size_) +
                             " bytes");
  }
  char* out = static_cast<char*>(data);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd_, out + done, bytes - done, static_cast<off_t>(offset + done));
    if (n == 0) {
      throw std::runtime_error("cannot read '" + path_ + "': it shrank to " + std::to_string(offset + done) +
                               " bytes while being read");
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      throw std::runtime_error("cannot read '" + path_ + "': " + system_reason(err));
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace ag
