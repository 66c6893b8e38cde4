// The admin surface never waits on the TargetManager actor: while the actor is busy (here, a fake
// that holds a ListStreams question until the test lets it go), other admin calls are answered,
// and the held call is answered once the actor replies.

#include "services/splicer/splicer_grpc.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <vector>

#include "libs/runtime/service_host.h"
#include "proto/reverser/v1/splicer.grpc.pb.h"

namespace reverser::splicer {
namespace {

// Stands in for the TargetManager actor: answers resplices at once; a summaries question blocks
// its thread until `release` is set (after telling `entered`).
struct SlowManager {
  std::promise<void> entered;  // set at the first question
  bool told = false;           // the actor's thread only
  std::shared_future<void> release;
};

TargetManagerActor::behavior_type SlowBehavior(TargetManagerActor::pointer /*self*/,
                                               std::shared_ptr<SlowManager> slow) {
  return {
      [](apply_atom, const reverser::v1::TableUpdate&) { return AppliedReply{}; },
      [](refusal_atom, const reverser::v1::DeliveryFeedback&) {},
      [](configs_atom) { return true; },
      [slow](summaries_atom) {
        if (!slow->told) slow->entered.set_value();
        slow->told = true;
        slow->release.wait();
        SummariesReply reply;
        reply.summaries.emplace_back().mutable_target()->set_uid("ta");
        return reply;
      },
      [](resplice_atom, const RespliceAsk& ask) {
        RespliceOutcome out;
        out.code = absl::StatusCode::kNotFound;
        out.message = "the splicer follows no GitTarget with uid " + ask.target.uid();
        return out;
      },
  };
}

class SplicerGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime::ServiceHostOptions options;
    options.service = "splicer";
    host_ = std::make_unique<runtime::ServiceHost>(options);
    slow_ = std::make_shared<SlowManager>();
    slow_->release = release_.get_future().share();
    actor_ = host_->actors().spawn<caf::detached>(SlowBehavior, slow_);
    // Far longer than the test takes: a held call ends with the actor's reply, not a timeout.
    admin_ = std::make_unique<SplicerAdminGrpcService>(host_.get(), &host_->actors(), actor_,
                                                       std::chrono::minutes(5));
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(admin_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = reverser::v1::SplicerAdmin::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    Release();
    server_->Shutdown();
    {
      caf::scoped_actor self(host_->actors());
      self->send_exit(actor_, caf::exit_reason::user_shutdown);
      self->wait_for(actor_);
    }
    actor_ = TargetManagerActor();
    admin_.reset();
    host_.reset();
  }

  void Release() {
    if (!released_) release_.set_value();
    released_ = true;
  }

  static void Deadline(grpc::ClientContext& context) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  }

  std::unique_ptr<runtime::ServiceHost> host_;
  std::shared_ptr<SlowManager> slow_;
  std::promise<void> release_;
  bool released_ = false;
  TargetManagerActor actor_;
  std::unique_ptr<SplicerAdminGrpcService> admin_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<reverser::v1::SplicerAdmin::Stub> stub_;
};

TEST_F(SplicerGrpcTest, OtherAdminCallsAreAnsweredWhileTheActorIsBusy) {
  // More held calls than gRPC has callback threads on this machine: were a handler to wait for
  // the actor, the calls below would find no thread to run on.
  constexpr int kHeld = 16;
  std::vector<std::future<std::pair<grpc::Status, reverser::v1::ListStreamsResponse>>> held;
  for (int i = 0; i < kHeld; ++i) {
    held.push_back(std::async(std::launch::async, [this] {
      grpc::ClientContext context;
      Deadline(context);
      reverser::v1::ListStreamsRequest request;
      reverser::v1::ListStreamsResponse response;
      grpc::Status status = stub_->ListStreams(&context, request, &response);
      return std::make_pair(status, response);
    }));
  }
  slow_->entered.get_future().wait();  // the actor holds the first question

  {
    grpc::ClientContext context;
    Deadline(context);
    reverser::v1::StatusRequest request;
    reverser::v1::ServiceStatus response;
    EXPECT_TRUE(stub_->Status(&context, request, &response).ok());
    EXPECT_EQ(response.service(), "splicer");
  }
  {
    // Checked before the actor is asked: answered by the handler itself.
    grpc::ClientContext context;
    Deadline(context);
    reverser::v1::RespliceRequest request;
    reverser::v1::RespliceResponse response;
    EXPECT_EQ(stub_->Resplice(&context, request, &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  for (auto& call : held) {
    EXPECT_NE(call.wait_for(std::chrono::seconds(0)), std::future_status::ready)
        << "answered before the actor replied";
  }

  Release();
  for (auto& call : held) {
    auto [status, response] = call.get();
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.summaries_size(), 1);
    EXPECT_EQ(response.summaries(0).target().uid(), "ta");
  }
}

TEST_F(SplicerGrpcTest, TheActorsRefusalIsTheCallsStatus) {
  grpc::ClientContext context;
  Deadline(context);
  reverser::v1::RespliceRequest request;
  request.mutable_target()->set_uid("nope");
  reverser::v1::RespliceResponse response;
  grpc::Status status = stub_->Resplice(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "the splicer follows no GitTarget with uid nope");
}

}  // namespace
}  // namespace reverser::splicer
