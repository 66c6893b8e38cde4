#pragma once

// The invariant policy. A state the code's own logic rules out (a bug, never bad input: input
// from the network, the cluster, Redis or Git gets an absl::Status) is reported with
// REVERSER_BUG or REVERSER_CHECK:
//   - always: counted (BugsReported(), exported as reverser_bugs_total) and logged through the
//     installed handler (a service logs it as a structured error line);
//   - where NDEBUG is unset (tests, debug builds): then the process aborts at the spot, so a test
//     that reaches an impossible state fails there and not three steps later;
//   - in release builds the caller goes on with its documented fallback (skip the item, keep
//     the old value), which the call site says.

#include <cstdint>
#include <functional>
#include <string_view>

namespace reverser::core {

struct BugReport {
  const char* file;
  int line;
  std::string_view what;
};

// Counts, hands the report to the handler and, unless NDEBUG is defined, aborts.
void ReportBug(const BugReport& report);
// How many bugs this process has reported.
int64_t BugsReported();
// Replaces the reporter (default: one line on stderr); returns the previous one. Call at start,
// before other threads run.
using BugHandler = std::function<void(const BugReport&)>;
BugHandler SetBugHandler(BugHandler handler);
// Whether a report aborts the process (NDEBUG unset).
bool BugsAbort();

}  // namespace reverser::core

#define REVERSER_BUG(what) ::reverser::core::ReportBug({__FILE__, __LINE__, (what)})
#define REVERSER_CHECK(condition, what) \
  do {                                  \
    if (!(condition)) REVERSER_BUG(what); \
  } while (false)
