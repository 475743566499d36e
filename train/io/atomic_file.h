// Crash-safe file replacement: write everything to a temporary file in the target's directory,
// flush and fsync it, then rename it over the target. A reader sees either the old file or the
// complete new one, never a half-written file, and a failure at any point leaves the old file
// untouched and removes the temporary.
//
//   AtomicFile out(path);          // creates "<path>.tmp-<pid>-<n>-<tag>"
//   out.write(header.data(), header.size());
//   out.commit();                  // fsync + rename; without commit() the destructor discards
//
// Every failure throws std::runtime_error naming the path and the system's reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ag {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // Overwrites bytes already written (a header whose counts are known only at the end), without
  // moving the position where write() appends. offset + bytes must not pass the bytes written.
  void write_at(uint64_t offset, const void* data, size_t bytes);
  // Makes the new contents durable and visible under `path`. Call once.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  void discard() noexcept;

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

// Replaces `path` with `contents` atomically (see AtomicFile).
void write_file_atomically(const std::string& path, std::string_view contents);

// The whole file as bytes; std::runtime_error naming the path if it cannot be read. Only a
// regular file is read (a FIFO, device or directory is refused without blocking), exactly as
// many bytes as its size when opened.
std::string read_file(const std::string& path);

// The name AtomicFile gives the n-th temporary of `path` in process `pid`:
// "<path>.tmp-<pid>-<n>-<tag>", where the tag is 8 hex digits of a CRC-32C over the file name,
// the pid and n. The tag is how a temporary proves it was made here: a user's file that merely
// looks like one ("ck.tmp-123-0", or the right shape with any other tag) is never ours.
std::string temporary_path(const std::string& path, long pid, unsigned n);

// Removes the temporaries that killed saves of `path` left behind, and nothing else: a file is
// removed only when its name is a temporary_path() of `path` (tag included), its process no
// longer exists, and it is a regular file (not a link) owned by this user. Returns how many.
// AtomicFile calls it before every save.
int remove_stale_temporaries(const std::string& path);

// A regular file opened for reading at any offset, for readers that copy each part of a large
// file straight to where it belongs instead of holding the whole file (models/gpt/gpt_weights.h).
// Refuses what read_file refuses; every failure is a std::runtime_error naming the path.
class FileReader {
 public:
  explicit FileReader(std::string path);
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Exactly `bytes` bytes from `offset`; an error names the range when the file ends first.
  void read(uint64_t offset, void* data, size_t bytes) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Writes all `bytes` to the descriptor, retrying short writes and EINTR: 0, or the errno of the
// failed write (EPIPE when the reader of a pipe has gone, ENOSPC on a full disk, ...).
int write_all(int fd, const void* data, size_t bytes);

}  // namespace ag
