#include "services/materializer/materializer_grpc.h"

#include <chrono>
#include <string>

#include "libs/rules/claim_syntax.h"
#include "libs/runtime/ask_actor.h"

namespace reverser::materializer {

grpc::ServerUnaryReactor* MaterializerAdminGrpcService::ListMaterializations(
    grpc::CallbackServerContext* context, const reverser::v1::ListMaterializationsRequest*,
    reverser::v1::ListMaterializationsResponse* response) {
  auto* reactor = context->DefaultReactor();
  caf::actor supervisor = Supervisor();
  if (!supervisor) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the supervisor has stopped"));
    return reactor;
  }
  runtime::AskActor(
      host()->actors(), supervisor, std::chrono::seconds(5),
      [reactor, response](MaterializationList& list) {
        response->Swap(&list.response);
        reactor->Finish(grpc::Status::OK);
      },
      [this, reactor](const caf::error& err) { reactor->Finish(Unavailable(err)); },
      list_atom::value);
  return reactor;
}

grpc::ServerUnaryReactor* MaterializerAdminGrpcService::Compact(
    grpc::CallbackServerContext* context, const reverser::v1::CompactRequest* request,
    reverser::v1::CompactResponse* response) {
  auto* reactor = context->DefaultReactor();
  // Folding a large checkpoint takes a while and one call may fold every materialization, so
  // the deadline is long; the handler still returns at once and the reply finishes the call.
  caf::actor supervisor = Supervisor();
  if (!supervisor) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the supervisor has stopped"));
    return reactor;
  }
  runtime::AskActor(
      host()->actors(), supervisor, std::chrono::minutes(5),
      [reactor, request, response](CompactOutcome& outcome) {
        response->Swap(&outcome.response);
        if (request->has_claim() && response->results().empty()) {
          reactor->Finish(grpc::Status(
              grpc::StatusCode::NOT_FOUND,
              "this materializer does not own claim " + rules::FormatClaim(request->claim())));
          return;
        }
        reactor->Finish(grpc::Status::OK);
      },
      [this, reactor](const caf::error& err) { reactor->Finish(Unavailable(err)); },
      compact_atom::value, *request);
  return reactor;
}

grpc::Status MaterializerAdminGrpcService::Unavailable(const caf::error& err) const {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, host()->actors().render(err));
}

}  // namespace reverser::materializer
