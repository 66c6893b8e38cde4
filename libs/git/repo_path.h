#pragma once

// Validation of paths inside a Git tree (what the manifest writer may write or delete).

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace reverser::git {

// OK for a relative, '/'-separated path with no empty, '.', '..' or '.git' (any case)
// component, no leading or trailing '/', no backslash and no NUL or other control characters.
// InvalidArgument naming the path and the rule otherwise.
absl::Status ValidateRepoPath(absl::string_view path);

}  // namespace reverser::git
