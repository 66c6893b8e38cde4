#include "libs/core/invariant.h"

#include <gtest/gtest.h>

#include <string>

namespace reverser::core {
namespace {

TEST(InvariantTest, ABugAbortsTestsAtTheSpotAndSaysWhere) {
  ASSERT_TRUE(BugsAbort());  // tests build without NDEBUG
  EXPECT_DEATH(REVERSER_BUG("a window closed twice"),
               "reverser bug at .*invariant_test.cc:[0-9]+: a window closed twice");
  EXPECT_DEATH(REVERSER_CHECK(1 + 1 == 3, "arithmetic"), "arithmetic");
}

TEST(InvariantTest, AHoldingCheckReportsNothing) {
  const int64_t before = BugsReported();
  REVERSER_CHECK(1 + 1 == 2, "arithmetic");
  EXPECT_EQ(BugsReported(), before);
}

TEST(InvariantTest, TheInstalledHandlerSeesTheReportBeforeTheAbort) {
  EXPECT_DEATH(
      {
        SetBugHandler([](const BugReport& report) {
          std::fprintf(stderr, "handled: %s\n", std::string(report.what).c_str());
        });
        REVERSER_BUG("two owners of one branch");
      },
      "handled: two owners of one branch");
}

}  // namespace
}  // namespace reverser::core
