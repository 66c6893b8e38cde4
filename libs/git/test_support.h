#pragma once

// Helpers shared by the libs/git tests.

#include <string>

#include "absl/time/time.h"
#include "libs/git/tree_editor.h"

namespace reverser::git::testutil {

// A commit spec with fixed identities and times, so `git log` output is predictable.
inline CommitSpec TestCommitSpec(const std::string& message,
                                 const std::string& author_name = "Jane Doe",
                                 const std::string& author_email = "jane@example.com") {
  CommitSpec spec;
  spec.author = {author_name, author_email, absl::FromUnixSeconds(1700000000), 60};
  spec.committer = {"GitOps Reverser", "noreply@configbutler.ai", absl::FromUnixSeconds(1700000100),
                    0};
  spec.message = message;
  return spec;
}

// Output of the git CLI without its trailing newline/spaces.
inline std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace reverser::git::testutil
