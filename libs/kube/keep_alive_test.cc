// HttplibTransport against a server that closes a kept-alive connection just as the next request
// arrives on it (what an idle timeout or a per-connection request limit does): an idempotent
// request goes again on a new connection; a POST, which the server may have acted on, does not.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "libs/kube/config.h"
#include "libs/kube/httplib_transport.h"

namespace reverser::kube {
namespace {

// Answers the first request of each connection (keeping it open) and closes the connection,
// unanswered, on its second.
class ClosingServer {
 public:
  ClosingServer() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(listener_, 8);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ClosingServer() {
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    thread_.join();
  }
  int port() const { return port_; }
  int requests() const { return requests_.load(); }
  int connections() const { return connections_.load(); }

 private:
  // One request's bytes (headers and a Content-Length body), or false when the peer closed.
  static bool ReadRequest(int fd, std::string& buffer) {
    char chunk[4096];
    while (true) {
      size_t end = buffer.find("\r\n\r\n");
      if (end != std::string::npos) {
        size_t body = 0;
        size_t at = buffer.find("Content-Length: ");
        if (at != std::string::npos && at < end) {
          size_t eol = buffer.find("\r\n", at);
          (void)absl::SimpleAtoi(buffer.substr(at + 16, eol - at - 16), &body);
        }
        if (buffer.size() >= end + 4 + body) {
          buffer.erase(0, end + 4 + body);
          return true;
        }
      }
      ssize_t n = read(fd, chunk, sizeof(chunk));
      if (n <= 0) return false;
      buffer.append(chunk, static_cast<size_t>(n));
    }
  }

  void Serve() {
    while (true) {
      int fd = accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      ++connections_;
      std::string buffer;
      if (ReadRequest(fd, buffer)) {
        ++requests_;
        const std::string body = "{}";
        std::string response = absl::StrCat(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
            "\r\nConnection: keep-alive\r\n\r\n", body);
        (void)!write(fd, response.data(), response.size());
        if (ReadRequest(fd, buffer)) ++requests_;  // read, never answered
      }
      close(fd);
    }
  }

  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> requests_{0};
  std::atomic<int> connections_{0};
};

std::unique_ptr<HttplibTransport> TransportTo(const ClosingServer& server) {
  ClusterConfig config;
  config.server = absl::StrCat("http://127.0.0.1:", server.port());
  auto transport = HttplibTransport::Create(config);
  EXPECT_TRUE(transport.ok()) << transport.status();
  return std::move(*transport);
}

HttpRequest Get() {
  HttpRequest get;
  get.path = "/api";
  return get;
}

TEST(KeepAliveTest, AGetOnAConnectionTheServerClosesGoesAgainOnANewOne) {
  ClosingServer server;
  auto transport = TransportTo(server);
  ASSERT_TRUE(transport->Send(Get()).ok());
  auto second = transport->Send(Get());  // on the kept connection, which the server drops
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->status, 200);
  EXPECT_EQ(server.requests(), 3) << "the dropped request and its retry";
  EXPECT_EQ(server.connections(), 2);
}

TEST(KeepAliveTest, APostOnAConnectionTheServerClosesIsNotSentTwice) {
  ClosingServer server;
  auto transport = TransportTo(server);
  ASSERT_TRUE(transport->Send(Get()).ok());
  HttpRequest post;
  post.method = "POST";
  post.path = "/api/v1/namespaces/team/configmaps";
  post.body = "{}";
  auto created = transport->Send(post);
  EXPECT_TRUE(absl::IsUnavailable(created.status())) << created.status();
  EXPECT_EQ(server.requests(), 2) << "the server may have acted on it: not sent again";
}

}  // namespace
}  // namespace reverser::kube
