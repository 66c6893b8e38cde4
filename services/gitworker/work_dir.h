#pragma once

// The gitworker's work dir holds clones with the history of every mirrored repository: it is
// created private (0700) and never used while other users may write it.

#include <string>

#include "absl/status/status.h"

namespace reverser::gitworker {

// Creates `path` (and missing parents) with mode 0700 on the last folder. An existing folder is
// used as it is, unless it is not a directory or is group- or world-writable: then an
// InvalidArgument error names the path and what is wrong.
absl::Status PreparePrivateWorkDir(const std::string& path);

}  // namespace reverser::gitworker
