#pragma once

// A Random that hands out scripted byte strings in order (tests reproduce golden vectors with
// it); when the script runs out it falls back to a deterministic counter pattern.

#include <deque>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "libs/sops/crypto.h"

namespace reverser::sops::testing {

class ScriptedRandom final : public crypto::Random {
 public:
  ScriptedRandom() = default;
  explicit ScriptedRandom(std::deque<std::string> script) : script_(std::move(script)) {}
  void Push(std::string bytes) { script_.push_back(std::move(bytes)); }
  int calls() const { return calls_; }

  absl::StatusOr<std::string> Bytes(size_t n) override {
    ++calls_;
    if (!script_.empty()) {
      std::string next = std::move(script_.front());
      script_.pop_front();
      if (next.size() != n) {
        return absl::InternalError(
            absl::StrCat("scripted random: wanted ", n, " bytes, script has ", next.size()));
      }
      return next;
    }
    std::string out(n, '\0');
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>(counter_++ * 37 + 11);
    return out;
  }

 private:
  std::deque<std::string> script_;
  int calls_ = 0;
  unsigned counter_ = 0;
};

}  // namespace reverser::sops::testing
