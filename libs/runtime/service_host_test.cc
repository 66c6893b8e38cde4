// ServiceHost: a second host on a gRPC port another host already serves fails to start (gRPC's
// default SO_REUSEPORT would let both bind and split the connections between them).

#include "libs/runtime/service_host.h"

#include <gtest/gtest.h>

namespace reverser::runtime {
namespace {

ServiceHostOptions Loopback(int grpc_port) {
  ServiceHostOptions options;
  options.service = "test";
  options.instance = "test-0";
  options.listen_address = "127.0.0.1";
  options.grpc_port = grpc_port;
  options.http_port = 0;
  options.grpc_security.insecure = true;
  return options;
}

TEST(ServiceHostTest, ASecondHostOnATakenGrpcPortFailsToStart) {
  ServiceHost first(Loopback(0));
  ASSERT_EQ(first.Start(), absl::OkStatus());
  ASSERT_GT(first.grpc_port(), 0);
  ServiceHost second(Loopback(first.grpc_port()));
  absl::Status started = second.Start();
  EXPECT_EQ(started.code(), absl::StatusCode::kUnavailable) << started;
  second.Shutdown();
  first.Shutdown();
}

}  // namespace
}  // namespace reverser::runtime
