#pragma once

// Helpers for tests that talk to kube-sim over real HTTP.

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace reverser::kubesim::testing {

// A watch (or any streaming GET) read incrementally on its own thread, split into lines.
class StreamReader {
 public:
  StreamReader(int port, std::string path_and_query) : client_("127.0.0.1", port) {
    thread_ = std::thread([this, path = std::move(path_and_query)] {
      auto res = client_.Get(
          path.c_str(),
          [this](const httplib::Response& r) {
            std::lock_guard lock(mu_);
            status_ = r.status;
            content_type_ = r.get_header_value("Content-Type");
            cv_.notify_all();
            return true;
          },
          [this](const char* data, size_t n) {
            std::lock_guard lock(mu_);
            buffer_.append(data, n);
            // Lines are cut out by position and the consumed prefix dropped once per read, so
            // a large chunk costs linear time (benches read backlogs of many MiB through this).
            // A reader waits only while there are no lines: wake it on that transition alone.
            const bool had_lines = !lines_.empty();
            size_t start = 0, pos;
            while ((pos = buffer_.find('\n', start)) != std::string::npos) {
              lines_.emplace_back(buffer_, start, pos - start);
              start = pos + 1;
            }
            buffer_.erase(0, start);
            if (!had_lines && !lines_.empty()) cv_.notify_all();
            return true;
          });
      std::lock_guard lock(mu_);
      ended_ = true;
      clean_end_ = static_cast<bool>(res);
      cv_.notify_all();
    });
  }
  ~StreamReader() {
    client_.stop();
    thread_.join();
  }

  // The next line, or "" if none arrived before the deadline / the stream ended.
  std::string Next(absl::Duration timeout = absl::Seconds(10)) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                 [this] { return !lines_.empty() || ended_; });
    if (lines_.empty()) return "";
    std::string line = std::move(lines_.front());
    lines_.pop_front();
    return line;
  }
  nlohmann::json NextJson(absl::Duration timeout = absl::Seconds(10)) {
    std::string line = Next(timeout);
    if (line.empty()) return nullptr;
    return nlohmann::json::parse(line, nullptr, false);
  }
  // Waits for the stream to end; returns true if it did before the deadline.
  bool WaitEnd(absl::Duration timeout = absl::Seconds(10)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout), [this] { return ended_; });
  }
  bool clean_end() {
    std::lock_guard lock(mu_);
    return clean_end_;
  }
  int status() {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [this] { return status_ != 0 || ended_; });
    return status_;
  }
  std::string content_type() {
    std::lock_guard lock(mu_);
    return content_type_;
  }

 private:
  httplib::Client client_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string buffer_;
  std::deque<std::string> lines_;
  int status_ = 0;
  std::string content_type_;
  bool ended_ = false;
  bool clean_end_ = false;
};

}  // namespace reverser::kubesim::testing
