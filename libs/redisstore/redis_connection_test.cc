#include "libs/redisstore/redis_connection.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "tests/fixtures/redis_server.h"
#include "libs/redisstore/test_redis.h"

namespace reverser::redisstore {
namespace {

class RedisConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = testing::RedisServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto connection = Connect();
    ASSERT_TRUE(connection.ok()) << connection.status();
    redis_ = std::move(*connection);
  }

  absl::StatusOr<std::unique_ptr<RedisConnection>> Connect(
      absl::Duration command_timeout = absl::Seconds(5)) {
    RedisOptions options = RedisOptionsFor(*server_);
    options.command_timeout = command_timeout;
    return RedisConnection::Connect(options);
  }

  std::unique_ptr<testing::RedisServer> server_;
  std::unique_ptr<RedisConnection> redis_;
};

TEST_F(RedisConnectionTest, BinarySafeArgumentsRoundTrip) {
  std::string value("a\0b\r\n\xff", 6);
  std::string key("k\0ey", 4);
  ASSERT_TRUE(redis_->Command({"SET", key, value}).ok());
  auto reply = redis_->Command({"GET", key});
  ASSERT_TRUE(reply.ok()) << reply.status();
  auto got = reply->AsString();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, value);
  EXPECT_EQ(got->size(), 6u);
}

TEST_F(RedisConnectionTest, TypedHelpersAndShapeErrors) {
  auto missing = redis_->Command({"GET", "nope"});
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(missing->IsNil());
  auto optional = missing->AsOptionalString();
  ASSERT_TRUE(optional.ok());
  EXPECT_FALSE(optional->has_value());
  EXPECT_EQ(missing->AsString().status().code(), absl::StatusCode::kInvalidArgument);

  auto count = redis_->Command({"INCRBY", "n", "41"});
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count->AsInteger(), 41);
  EXPECT_EQ(count->AsString().status().code(), absl::StatusCode::kInvalidArgument);

  ASSERT_TRUE(redis_->Command({"HSET", "h", "a", "1", "b", "2"}).ok());
  auto all = redis_->Command({"HGETALL", "h"});
  ASSERT_TRUE(all.ok());
  auto map = all->AsStringMap();
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->size(), 2u);
  EXPECT_EQ(map->at("b"), "2");
}

TEST_F(RedisConnectionTest, ErrorRepliesBecomeStatuses) {
  ASSERT_TRUE(redis_->Command({"SET", "s", "x"}).ok());
  auto wrong = redis_->Command({"HGET", "s", "f"});
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition) << wrong.status();
  EXPECT_NE(wrong.status().message().find("WRONGTYPE"), std::string::npos);
  auto unknown = redis_->Command({"NOSUCHCOMMAND"});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(redis_->Command({}).status().code(), absl::StatusCode::kInvalidArgument);
  // The connection is still usable after error replies.
  EXPECT_TRUE(redis_->Command({"PING"}).ok());
}

TEST_F(RedisConnectionTest, PipelineKeepsPerCommandErrors) {
  ASSERT_TRUE(redis_->Command({"SET", "s", "x"}).ok());
  auto replies = redis_->Pipeline({{"SET", "a", "1"}, {"LPUSH", "s", "v"}, {"GET", "a"}});
  ASSERT_TRUE(replies.ok()) << replies.status();
  ASSERT_EQ(replies->size(), 3u);
  EXPECT_FALSE((*replies)[0].IsError());
  EXPECT_TRUE((*replies)[1].IsError());
  EXPECT_EQ(*(*replies)[2].AsString(), "1");
}

// Views: the bytes are sent as they are (binary, empty, large), nothing is copied first.
TEST_F(RedisConnectionTest, TransactionViewsSendsTheReferencedBytes) {
  const std::string value("v\0\r\n$3\r\n*", 10);
  const std::string big(3 << 20, 'b');
  auto replies = redis_->TransactionViews({{"SET", "view", value},
                                           {"SET", "empty", ""},
                                           {"SET", "big", big},
                                           {"GET", "view"},
                                           {"STRLEN", "big"},
                                           {"GET", "empty"}});
  ASSERT_TRUE(replies.ok()) << replies.status();
  ASSERT_EQ(replies->size(), 6u);
  EXPECT_EQ(*(*replies)[3].AsString(), value);
  EXPECT_EQ(*(*replies)[4].AsInteger(), static_cast<int64_t>(big.size()));
  EXPECT_EQ(*(*replies)[5].AsString(), "");
  // An empty command anywhere rejects the whole transaction before anything is sent; the
  // connection stays in step (not left inside a MULTI).
  EXPECT_EQ(redis_->TransactionViews({{"SET", "later", "1"}, {}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto later = redis_->Command({"EXISTS", "later"});
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->AsInteger().value_or(-1), 0);
}

TEST_F(RedisConnectionTest, TransactionIsAllOrNothingAndHonoursWatch) {
  auto ok = redis_->Transaction({{"SET", "a", "1"}, {"INCR", "a"}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ(*(*ok)[1].AsInteger(), 2);

  // A command rejected while queueing discards the whole transaction.
  auto rejected = redis_->Transaction({{"SET", "b", "1"}, {"SET", "only-one-arg"}});
  EXPECT_FALSE(rejected.ok());
  auto b = redis_->Command({"EXISTS", "b"});
  EXPECT_EQ(*b->AsInteger(), 0);

  // WATCH + a concurrent write on another connection aborts EXEC.
  ASSERT_TRUE(redis_->Command({"WATCH", "a"}).ok());
  auto other = Connect();
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->Command({"SET", "a", "changed"}).ok());
  auto aborted = redis_->Transaction({{"SET", "a", "mine"}});
  EXPECT_EQ(aborted.status().code(), absl::StatusCode::kAborted) << aborted.status();
  EXPECT_EQ(*redis_->Command({"GET", "a"})->AsString(), "changed");
}

TEST_F(RedisConnectionTest, EvalLoadsScriptAfterFlush) {
  LuaScript script("return redis.call('INCRBY', KEYS[1], ARGV[1])");
  EXPECT_EQ(script.sha1().size(), 40u);
  auto first = redis_->Eval(script, {"counter"}, {"5"});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first->AsInteger(), 5);
  // The SHA1 we compute is the one Redis computes.
  auto exists = redis_->Command({"SCRIPT", "EXISTS", script.sha1()});
  ASSERT_TRUE(exists.ok());
  EXPECT_EQ(*exists->elements()[0].AsInteger(), 1);
  ASSERT_TRUE(redis_->Command({"SCRIPT", "FLUSH"}).ok());
  auto second = redis_->Eval(script, {"counter"}, {"2"});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second->AsInteger(), 7);

  LuaScript failing("return redis.error_reply('BOOM nope')");
  EXPECT_FALSE(redis_->Eval(failing, {}, {}).ok());
}

TEST_F(RedisConnectionTest, BlockingReadTimesOutWithNil) {
  ASSERT_TRUE(redis_->Command({"XADD", "s", "1-1", "f", "v"}).ok());
  auto reply = redis_->BlockingCommand({"XREAD", "BLOCK", "50", "STREAMS", "s", "$"},
                                       absl::Milliseconds(50));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->IsNil());
}

TEST_F(RedisConnectionTest, CommandTimeoutDropsAndNextCallReconnects) {
  auto connection = Connect(absl::Milliseconds(100));
  ASSERT_TRUE(connection.ok());
  auto blocked = (*connection)->Command({"BLPOP", "never", "0"});
  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kDeadlineExceeded) << blocked.status();
  EXPECT_FALSE((*connection)->connected());
  auto pong = (*connection)->Command({"PING"});
  ASSERT_TRUE(pong.ok()) << pong.status();
  EXPECT_EQ(*pong->AsString(), "PONG");
}

TEST_F(RedisConnectionTest, SurvivesServerRestart) {
  ASSERT_TRUE(redis_->Command({"SET", "a", "1"}).ok());
  ASSERT_TRUE(server_->Restart().ok());
  // The old socket is dead: the first call may fail (Unavailable); the one after reconnects.
  auto first = redis_->Command({"PING"});
  if (!first.ok()) {
    EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable) << first.status();
  }
  auto second = redis_->Command({"PING"});
  ASSERT_TRUE(second.ok()) << second.status();
}

TEST_F(RedisConnectionTest, SelectsDatabaseAndAuthenticates) {
  RedisOptions options = RedisOptionsFor(*server_);
  options.database = 3;
  auto db3 = RedisConnection::Connect(options);
  ASSERT_TRUE(db3.ok()) << db3.status();
  ASSERT_TRUE((*db3)->Command({"SET", "where", "db3"}).ok());
  EXPECT_TRUE(redis_->Command({"GET", "where"})->IsNil());  // db 0 does not see it

  ASSERT_TRUE(redis_->Command({"CONFIG", "SET", "requirepass", "s3cret"}).ok());
  options.database = 0;
  auto anonymous = RedisConnection::Connect(options);
  ASSERT_TRUE(anonymous.ok());  // connecting needs no auth; commands do
  EXPECT_EQ((*anonymous)->Command({"GET", "x"}).status().code(),
            absl::StatusCode::kPermissionDenied);
  options.password = "wrong";
  EXPECT_EQ(RedisConnection::Connect(options).status().code(), absl::StatusCode::kPermissionDenied);
  options.password = "s3cret";
  options.database = 3;
  auto authed = RedisConnection::Connect(options);
  ASSERT_TRUE(authed.ok()) << authed.status();
  EXPECT_EQ(*(*authed)->Command({"GET", "where"})->AsString(), "db3");

  // An ACL user (Redis 6+), as a managed Redis hands out.
  ASSERT_TRUE((*authed)
                  ->Command({"ACL", "SETUSER", "reverser", "on", ">user-pass", "~*", "&*", "+@all"})
                  .ok());
  options.username = "reverser";
  options.password = "s3cret";  // the default user's password is not this user's
  EXPECT_EQ(RedisConnection::Connect(options).status().code(), absl::StatusCode::kPermissionDenied);
  options.password = "user-pass";
  auto as_user = RedisConnection::Connect(options);
  ASSERT_TRUE(as_user.ok()) << as_user.status();
  EXPECT_EQ(*(*as_user)->Command({"ACL", "WHOAMI"})->AsString(), "reverser");
}

TEST(RedisConnectionStandaloneTest, RefusedConnectionIsUnavailable) {
  auto port = testing::PickFreePort();
  ASSERT_TRUE(port.ok());
  RedisOptions options;
  options.port = *port;
  auto connection = RedisConnection::Connect(options);
  EXPECT_EQ(connection.status().code(), absl::StatusCode::kUnavailable) << connection.status();
}

TEST(RedisOptionsTest, ParsesAddress) {
  auto options = RedisOptions::FromAddress("redis.svc:6380");
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->host, "redis.svc");
  EXPECT_EQ(options->port, 6380);
  EXPECT_FALSE(RedisOptions::FromAddress("nohost").ok());
  EXPECT_FALSE(RedisOptions::FromAddress("h:0").ok());
  EXPECT_FALSE(RedisOptions::FromAddress("h:x").ok());
}

}  // namespace
}  // namespace reverser::redisstore
