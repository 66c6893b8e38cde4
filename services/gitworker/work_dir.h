#pragma once

// The gitworker's work dir holds clones with the history of every mirrored repository: it is
// created private (0700) and never used while other users may write it.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace reverser::gitworker {

// Creates `path` (and missing parents) with mode 0700 on the last folder. An existing folder is
// used as it is, unless it is not a directory or is group- or world-writable: then an
// InvalidArgument error names the path and what is wrong.
absl::Status PreparePrivateWorkDir(const std::string& path);

// `<work dir>/.lock`, held (flock) while the gitworker runs: one process per work dir. Holding it
// makes every git lock file in the clones older than `since()` a dead process's (a SIGKILL
// mid-update), safe to remove (git::RepositoryOptions::stale_lock_cutoff).
class WorkDirLock {
 public:
  // FailedPrecondition when another process holds it (naming the folder).
  static absl::StatusOr<std::unique_ptr<WorkDirLock>> Acquire(const std::string& work_dir);
  ~WorkDirLock();
  WorkDirLock(const WorkDirLock&) = delete;
  WorkDirLock& operator=(const WorkDirLock&) = delete;
  absl::Time since() const { return since_; }

 private:
  WorkDirLock(int fd, absl::Time since) : fd_(fd), since_(since) {}
  int fd_;
  absl::Time since_;
};

}  // namespace reverser::gitworker
