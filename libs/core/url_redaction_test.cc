#include "libs/core/url_redaction.h"

#include "gtest/gtest.h"

namespace reverser::core {
namespace {

TEST(RedactUrlTest, UserInformationNeverShows) {
  EXPECT_EQ(RedactUrl("https://bot:ghp_s3cret@github.com/o/r.git"), "https://***@github.com/o/r.git");
  EXPECT_EQ(RedactUrl("https://ghp_s3cret@github.com/o/r.git"), "https://***@github.com/o/r.git");
  EXPECT_EQ(RedactUrl("ssh://git@host:2222/r.git"), "ssh://***@host:2222/r.git");
  // A password holding '@' ends at the last '@' of the authority.
  EXPECT_EQ(RedactUrl("https://u:p@ss@host"), "https://***@host");
  // An '@' after the authority is a path, not credentials.
  EXPECT_EQ(RedactUrl("https://host/team@x/r.git"), "https://host/team@x/r.git");
}

TEST(RedactUrlTest, UrlsWithoutCredentialsAreUnchanged) {
  for (const char* url : {"https://github.com/o/r.git", "git@github.com:o/r.git", "/srv/r.git",
                          "file:///srv/r.git", "", "https://"}) {
    EXPECT_EQ(RedactUrl(url), url);
  }
}

}  // namespace
}  // namespace reverser::core
