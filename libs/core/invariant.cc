#include "libs/core/invariant.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace reverser::core {
namespace {

std::atomic<int64_t> bugs{0};

BugHandler& Handler() {
  static BugHandler* handler = new BugHandler([](const BugReport& report) {
    std::fprintf(stderr, "reverser bug at %s:%d: %.*s\n", report.file, report.line,
                 static_cast<int>(report.what.size()), report.what.data());
  });
  return *handler;
}

}  // namespace

bool BugsAbort() {
#ifdef NDEBUG
  return false;
#else
  return true;
#endif
}

void ReportBug(const BugReport& report) {
  bugs.fetch_add(1, std::memory_order_relaxed);
  Handler()(report);
  if (BugsAbort()) std::abort();
}

int64_t BugsReported() { return bugs.load(std::memory_order_relaxed); }

BugHandler SetBugHandler(BugHandler handler) { return std::exchange(Handler(), std::move(handler)); }

}  // namespace reverser::core
