#include "services/splicer/target_manager_actor.h"

#include <utility>

namespace reverser::splicer {
namespace {

TargetManagerActor::behavior_type ManagerBehavior(TargetManagerActor::pointer /*self*/,
                                                  TargetManager* manager) {
  return {
      [manager](apply_atom, const reverser::v1::TableUpdate& update) {
        manager->Apply(update);
        return AppliedReply{static_cast<uint64_t>(manager->stream_count())};
      },
      [manager](refusal_atom, const reverser::v1::DeliveryFeedback& feedback) {
        manager->OnRefusal(feedback);
      },
      [manager](configs_atom) {
        manager->SendConfigs();
        return true;
      },
      [manager](summaries_atom) { return SummariesReply{manager->Summaries()}; },
      [manager](resplice_atom, const RespliceAsk& ask) {
        RespliceOutcome out;
        auto claims = manager->Resplice(ask.target, ask.claim ? &*ask.claim : nullptr);
        if (!claims.ok()) {
          out.code = claims.status().code();
          out.message = std::string(claims.status().message());
        } else {
          out.claims = std::move(*claims);
        }
        return out;
      },
  };
}

}  // namespace

TargetManagerActor SpawnTargetManagerActor(caf::actor_system& system, TargetManager* manager) {
  return system.spawn<caf::detached>(ManagerBehavior, manager);
}

}  // namespace reverser::splicer
