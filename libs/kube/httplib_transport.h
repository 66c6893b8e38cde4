#pragma once

// HttpTransport over cpp-httplib (HTTP/1.1, OpenSSL): server CA (in-memory PEM), client
// certificates, bearer tokens (token files re-read every minute and after a 401),
// insecure-skip-tls-verify and a server URL path prefix. Plain requests reuse keep-alive
// connections from a small pool; each stream gets its own connection so it can be cancelled
// alone.

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "libs/kube/config.h"
#include "libs/kube/rest_client.h"
#include "libs/kube/transport.h"

namespace httplib {
class ClientImpl;
}

namespace reverser::kube {

class HttplibTransport final : public HttpTransport {
 public:
  // Validates the server URL and TLS material up front.
  static absl::StatusOr<std::unique_ptr<HttplibTransport>> Create(const ClusterConfig& config);
  ~HttplibTransport() override;

  absl::StatusOr<HttpResponse> Send(const HttpRequest& request) override;
  absl::StatusOr<HttpResponse> Stream(const HttpRequest& request,
                                      const std::function<bool(absl::string_view)>& on_data,
                                      CancelToken* cancel) override;

  // The User-Agent sent with every request.
  void set_user_agent(std::string user_agent) { user_agent_ = std::move(user_agent); }

 private:
  struct Endpoint {
    bool tls = false;
    std::string host;  // without IPv6 brackets
    int port = 0;
    std::string path_prefix;  // "" or "/prefix" (no trailing slash)
  };

  HttplibTransport(ClusterConfig config, Endpoint endpoint);
  absl::StatusOr<std::unique_ptr<httplib::ClientImpl>> NewClient() const;
  std::unique_ptr<httplib::ClientImpl> TakePooledClient();
  void ReturnPooledClient(std::unique_ptr<httplib::ClientImpl> client);
  // The bearer token; from the token file when set (cached for a minute, or re-read now).
  absl::StatusOr<std::string> BearerToken(bool reload);
  absl::StatusOr<HttpResponse> SendWithToken(const HttpRequest& request, const std::string& token);

  const ClusterConfig config_;
  const Endpoint endpoint_;
  std::string user_agent_ = "reverser/0.1 (linux) kube-client";

  absl::Mutex pool_mu_;
  std::vector<std::unique_ptr<httplib::ClientImpl>> pool_ ABSL_GUARDED_BY(pool_mu_);

  absl::Mutex token_mu_;
  std::string cached_token_ ABSL_GUARDED_BY(token_mu_);
  absl::Time token_read_at_ ABSL_GUARDED_BY(token_mu_) = absl::InfinitePast();
};

// A RestClient over a new HttplibTransport: how a service or a test talks to one cluster.
// `user_agent` empty keeps the transport's default.
absl::StatusOr<std::shared_ptr<RestClient>> NewHttplibRestClient(const ClusterConfig& config,
                                                                 std::string user_agent = "",
                                                                 RestClientOptions options = {});

}  // namespace reverser::kube
