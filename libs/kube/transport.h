#pragma once

// The HTTP seam of the client. RestClient and the reflector talk only to HttpTransport, so
// tests (or a future HTTP/2 implementation) can swap it. HttplibTransport is the real one.

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace reverser::kube {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method = "GET";
  std::string path;    // absolute path plus query, e.g. "/api/v1/namespaces/a/configmaps?limit=5"
  HeaderList headers;  // e.g. Accept, Content-Type
  std::string body;
  // Longest wait for the next response byte (for streams: between chunks). Zero = the
  // transport's default (RestClient fills in its request_timeout).
  absl::Duration timeout = absl::ZeroDuration();
};

struct HttpResponse {
  int status = 0;
  HeaderList headers;
  std::string body;  // for streams: only filled for non-2xx responses

  // Case-insensitive header lookup; "" if absent.
  std::string Header(absl::string_view name) const;
};

// Cancels a stream from another thread. The transport registers how to abort the request in
// flight; Cancel() runs it (once) and makes later registrations fire immediately.
class CancelToken {
 public:
  void Cancel();
  bool cancelled() const;
  // Runs `abort` on Cancel(), or right away if already cancelled. Replaces any previous one.
  // `abort` runs under the token's lock: it must be quick and must not call the token.
  void SetAbort(std::function<void()> abort);
  void ClearAbort();

 private:
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> abort_ ABSL_GUARDED_BY(mu_);
};

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;

  // One request, whole response in memory. Transport failures are Unavailable; any HTTP
  // status (including 4xx/5xx) is a successful HttpResponse.
  virtual absl::StatusOr<HttpResponse> Send(const HttpRequest& request) = 0;

  // A streamed request. For a 2xx status every body slice goes to `on_data` as it arrives (the
  // body is never accumulated); other statuses collect the body into the result. Returns when
  // the server ends the body. Unavailable when the connection fails or drops mid-body,
  // Cancelled when `cancel` fired or `on_data` returned false.
  virtual absl::StatusOr<HttpResponse> Stream(
      const HttpRequest& request, const std::function<bool(absl::string_view chunk)>& on_data,
      CancelToken* cancel) = 0;
};

}  // namespace reverser::kube
