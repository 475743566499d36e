#include "train/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace ag {

namespace {

std::string system_reason(int err) { return std::strerror(err); }

std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  if (path_.empty()) throw std::runtime_error("AtomicFile: empty file name");
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
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw std::runtime_error("cannot read '" + path + "': " + system_reason(err));
  }
  std::string bytes;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) bytes.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw std::runtime_error("cannot read '" + path + "': " + system_reason(err));
    }
    bytes.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return bytes;
}

}  // namespace ag
