#include "shardtrain/base/durable_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "shardtrain/base/error.hpp"

namespace shardtrain {
namespace fs = std::filesystem;
namespace {

// Renames `temporary` over `path`; removes `temporary` when that fails.
void rename_over(const std::string& temporary, const std::string& path) {
  if (std::rename(temporary.c_str(), path.c_str()) == 0) return;
  const std::string why = std::strerror(errno);
  ::unlink(temporary.c_str());
  throw IoError(path + ": cannot rename " + temporary + " over it (" + why + ")");
}

}  // namespace

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(path + ": cannot open to fsync (" + std::strerror(errno) + ")");
  if (::fsync(fd) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw IoError(path + ": fsync failed (" + why + "): the data may not be on disk; check the file system");
  }
  ::close(fd);
}

void write_file_atomically(const std::string& path, const std::string& content, Durability durability) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(tmp + ": cannot create (" + std::string(std::strerror(errno)) + ")");
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      throw IoError(tmp + ": write failed (" + why + "); free space or fix permissions and retry");
    }
    done += std::size_t(n);
  }
  if (::close(fd) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw IoError(tmp + ": close failed (" + why + ")");
  }
  if (durability == Durability::kDurable) return commit_file_atomically(tmp, path);
  rename_over(tmp, path);
}

void commit_file_atomically(const std::string& temporary, const std::string& path) {
  try {
    fsync_path(temporary);
  } catch (...) {
    ::unlink(temporary.c_str());
    throw;
  }
  rename_over(temporary, path);
  const fs::path parent = fs::path(path).parent_path();
  fsync_path(parent.empty() ? "." : parent.string());
}

void write_json_file(const std::string& path, const nlohmann::json& value, Durability durability) {
  write_file_atomically(path, value.dump(2) + "\n", durability);
}

}  // namespace shardtrain
