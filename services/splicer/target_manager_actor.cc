#include "services/splicer/target_manager_actor.h"

#include <utility>

namespace reverser::splicer {
namespace {

ManagerActor::behavior_type ManagerBehavior(ManagerActor::pointer self, TargetManager* manager,
                                            absl::Duration tick) {
  const auto period = absl::ToChronoMilliseconds(tick);
  if (tick > absl::ZeroDuration()) self->delayed_send(self, period, tick_atom::value);
  return {
      [manager](membership_atom, const membership::Membership& members) {
        manager->SetMembership(members);
      },
      [manager](gitworkers_atom, const membership::Membership& members) {
        manager->SetGitworkerMembership(members);
      },
      [self, manager, period](tick_atom) {
        manager->Tick();
        self->delayed_send(self, period, tick_atom::value);
      },
      [manager](fenced_atom, const reverser::v1::GitTargetRef& target) {
        manager->OnFenced(target);
      },
      [manager](feedback_atom, const std::string& address,
                const reverser::v1::DeliveryFeedback& feedback) {
        manager->OnFeedback(address, feedback);
      },
      [manager](owned_atom) {
        return OwnedReply{manager->ActiveTargets(), manager->Routes()};
      },
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

ManagerActor SpawnTargetManagerActor(caf::actor_system& system, TargetManager* manager,
                                     absl::Duration tick) {
  ManagerActor actor = system.spawn<caf::detached>(ManagerBehavior, manager, tick);
  // Weak: the manager (and the clients and streams it owns) must not keep the actor alive.
  caf::weak_actor_ptr weak = caf::actor_cast<caf::weak_actor_ptr>(actor);
  manager->SetPosts(TargetManagerPosts{
      [weak](const reverser::v1::GitTargetRef& target) {
        if (auto strong = caf::actor_cast<caf::strong_actor_ptr>(weak)) {
          caf::anon_send(caf::actor_cast<ManagerActor>(strong), fenced_atom::value, target);
        }
      },
      [weak](const std::string& address, const reverser::v1::DeliveryFeedback& feedback) {
        if (auto strong = caf::actor_cast<caf::strong_actor_ptr>(weak)) {
          caf::anon_send(caf::actor_cast<ManagerActor>(strong), feedback_atom::value, address,
                         feedback);
        }
      }});
  return actor;
}

}  // namespace reverser::splicer
