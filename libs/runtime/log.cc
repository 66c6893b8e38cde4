#include "libs/runtime/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace reverser::runtime {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::mutex g_mu;
std::string& ServiceName() {
  static std::string* name = new std::string("reverser");
  return *name;
}

absl::string_view LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

}  // namespace

void SetLogService(absl::string_view service) {
  std::lock_guard lock(g_mu);
  ServiceName() = std::string(service);
}

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }

bool ParseLogLevel(absl::string_view text, LogLevel* level) {
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}) {
    if (text == LevelName(l)) {
      *level = l;
      return true;
    }
  }
  return false;
}

std::string FormatLogLine(LogLevel level, absl::string_view service, absl::string_view message,
                          std::initializer_list<LogField> fields) {
  nlohmann::ordered_json line;
  line["ts"] = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  line["level"] = std::string(LevelName(level));
  line["service"] = std::string(service);
  line["msg"] = std::string(message);
  for (const auto& field : fields) {
    std::visit([&](const auto& v) { line[field.key] = v; }, field.value);
  }
  // Replace invalid UTF-8 instead of throwing: log text can come from the network.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void Log(LogLevel level, absl::string_view message, std::initializer_list<LogField> fields) {
  if (static_cast<int>(level) < g_level.load()) return;
  std::lock_guard lock(g_mu);
  std::string text = FormatLogLine(level, ServiceName(), message, fields);
  text.push_back('\n');
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace reverser::runtime
