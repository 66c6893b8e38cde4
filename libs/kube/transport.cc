#include "libs/kube/transport.h"

#include "absl/strings/match.h"

namespace reverser::kube {

std::string HttpResponse::Header(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) return value;
  }
  return "";
}

// abort_ runs under the lock so ClearAbort() (called before the transport destroys what abort_
// touches) waits for a running abort to finish.
void CancelToken::Cancel() {
  absl::MutexLock lock(&mu_);
  if (cancelled_) return;
  cancelled_ = true;
  if (abort_) abort_();
}

bool CancelToken::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

void CancelToken::SetAbort(std::function<void()> abort) {
  absl::MutexLock lock(&mu_);
  abort_ = std::move(abort);
  if (cancelled_ && abort_) abort_();
}

void CancelToken::ClearAbort() {
  absl::MutexLock lock(&mu_);
  abort_ = nullptr;
}

}  // namespace reverser::kube
