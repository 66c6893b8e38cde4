#pragma once

// Structured logging: one JSON object per line on stderr, e.g.
// {"ts":"2026-11-29T14:00:00.123Z","level":"info","service":"catalog","msg":"listening","grpc_port":40123}

#include <initializer_list>
#include <string>
#include <utility>
#include <variant>

#include "absl/strings/string_view.h"

namespace reverser::runtime {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// A log field value: text, integer, floating point or boolean.
using LogValue = std::variant<std::string, long long, double, bool>;

struct LogField {
  LogField(absl::string_view k, const char* v) : key(k), value(std::string(v)) {}
  LogField(absl::string_view k, absl::string_view v) : key(k), value(std::string(v)) {}
  LogField(absl::string_view k, const std::string& v) : key(k), value(v) {}
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>>
  LogField(absl::string_view k, T v) : key(k), value(static_cast<long long>(v)) {}
  LogField(absl::string_view k, double v) : key(k), value(v) {}
  LogField(absl::string_view k, bool v) : key(k), value(v) {}

  std::string key;
  LogValue value;
};

// Process-wide settings: the service name stamped on every line and the minimum level.
void SetLogService(absl::string_view service);
void SetLogLevel(LogLevel level);
bool ParseLogLevel(absl::string_view text, LogLevel* level);

void Log(LogLevel level, absl::string_view message, std::initializer_list<LogField> fields = {});

inline void LogInfo(absl::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kInfo, m, f);
}
inline void LogWarning(absl::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kWarning, m, f);
}
inline void LogError(absl::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kError, m, f);
}
inline void LogDebug(absl::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kDebug, m, f);
}

// Renders one log line without writing it (used by tests and by Log).
std::string FormatLogLine(LogLevel level, absl::string_view service, absl::string_view message,
                          std::initializer_list<LogField> fields);

}  // namespace reverser::runtime
