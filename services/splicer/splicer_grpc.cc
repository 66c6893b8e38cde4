#include "services/splicer/splicer_grpc.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "libs/runtime/ask_actor.h"

namespace reverser::splicer {
namespace {

grpc::Status Unanswered(const caf::error& error) {
  return grpc::Status(
      grpc::StatusCode::UNAVAILABLE,
      absl::StrCat("the splicer's target manager did not answer: ", caf::to_string(error)));
}

const grpc::Status kStopping(grpc::StatusCode::UNAVAILABLE, "the splicer is stopping");

}  // namespace

caf::actor SplicerAdminGrpcService::Manager() const {
  return caf::actor_cast<caf::actor>(manager_.lock());
}

grpc::ServerUnaryReactor* SplicerAdminGrpcService::ListStreams(
    grpc::CallbackServerContext* context, const reverser::v1::ListStreamsRequest* request,
    reverser::v1::ListStreamsResponse* response) {
  auto* reactor = context->DefaultReactor();
  const std::string uid = request->target().uid();
  caf::actor manager = Manager();
  if (!manager) {
    reactor->Finish(kStopping);
    return reactor;
  }
  runtime::AskActor(
      *system_, std::move(manager), timeout_,
      [reactor, response, uid](SummariesReply& reply) {
        for (auto& summary : reply.summaries) {
          if (!uid.empty() && summary.target().uid() != uid) continue;
          *response->add_summaries() = std::move(summary);
        }
        reactor->Finish(grpc::Status::OK);
      },
      [reactor](const caf::error& error) { reactor->Finish(Unanswered(error)); },
      summaries_atom::value);
  return reactor;
}

grpc::ServerUnaryReactor* SplicerAdminGrpcService::Resplice(
    grpc::CallbackServerContext* context, const reverser::v1::RespliceRequest* request,
    reverser::v1::RespliceResponse* response) {
  auto* reactor = context->DefaultReactor();
  const auto& target = request->target();
  if (target.uid().empty() && (target.namespace_().empty() || target.name().empty())) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "target needs a uid or a namespace and name"));
    return reactor;
  }
  RespliceAsk ask;
  ask.target = target;
  if (request->has_claim() && !request->claim().type().gvr().resource().empty()) {
    ask.claim = request->claim();
  }
  caf::actor manager = Manager();
  if (!manager) {
    reactor->Finish(kStopping);
    return reactor;
  }
  runtime::AskActor(
      *system_, std::move(manager), timeout_,
      [reactor, response](RespliceOutcome& outcome) {
        if (outcome.code != absl::StatusCode::kOk) {
          reactor->Finish(
              grpc::Status(static_cast<grpc::StatusCode>(outcome.code), outcome.message));
          return;
        }
        response->set_streams(static_cast<uint32_t>(outcome.claims.size()));
        for (auto& claim : outcome.claims) *response->add_claims() = std::move(claim);
        reactor->Finish(grpc::Status::OK);
      },
      [reactor](const caf::error& error) { reactor->Finish(Unanswered(error)); },
      resplice_atom::value, std::move(ask));
  return reactor;
}

}  // namespace reverser::splicer
