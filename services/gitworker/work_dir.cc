#include "services/gitworker/work_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace reverser::gitworker {

absl::Status PreparePrivateWorkDir(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("--work_dir must be set");
  const std::filesystem::path dir(path);
  std::error_code error;
  if (dir.has_parent_path()) std::filesystem::create_directories(dir.parent_path(), error);
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create the parents of --work_dir ", path, ": ", error.message()));
  }
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create --work_dir ", path, ": ", std::strerror(errno)));
  }
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read --work_dir ", path, ": ", std::strerror(errno)));
  }
  if (!S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("--work_dir ", path, " is not a directory"));
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--work_dir %s is writable by other users (mode %04o): clones hold every mirrored "
        "repository; use a private folder (the gitworker creates a missing one with mode 0700)",
        path, info.st_mode & 07777));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<WorkDirLock>> WorkDirLock::Acquire(const std::string& work_dir) {
  const std::string path = work_dir + "/.lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    close(fd);
    if (error == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat("--work_dir ", work_dir, " is in use by another gitworker process (", path,
                       " is locked); give each replica its own work dir"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot lock ", path, ": ", std::strerror(error)));
  }
  return std::unique_ptr<WorkDirLock>(new WorkDirLock(fd, absl::Now()));
}

WorkDirLock::~WorkDirLock() { close(fd_); }

}  // namespace reverser::gitworker
